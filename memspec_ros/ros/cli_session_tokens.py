"""Session tokens that ``memspec_generate`` keeps between runs.

The node binds a dialogue session to the client that opened it with a secret token (see
:mod:`memspec_ros.ros.dialogue_store`). A program keeps the token in memory; a command-line user
runs one process per turn, so the tool remembers each session's token in a small file in the
ROS home folder (``$ROS_HOME``, default ``~/.ros``), readable by this user only (the tokens
are the sessions' secrets). Keyed by the action's resolved name and the session id, so the
same id on two robots' namespaces does not collide.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

FILE_NAME = "memspec_session_tokens.json"


def default_path() -> Path:
    """Where the tokens live: ``$ROS_HOME/memspec_session_tokens.json`` (``~/.ros`` by default)."""
    return Path(os.environ.get("ROS_HOME") or Path.home() / ".ros") / FILE_NAME


class SessionTokenFile:
    """Read and update the remembered tokens; a missing or unreadable file means none."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()

    def get(self, action: str, session_id: str) -> str:
        """The remembered token of ``session_id`` on ``action``, or "" (the node then opens it)."""
        return self._read().get(action, {}).get(session_id, "")

    def put(self, action: str, session_id: str, token: str) -> None:
        """Remember ``token``; written atomically with mode 0600."""
        tokens = self._read()
        if tokens.get(action, {}).get(session_id) == token:
            return
        tokens.setdefault(action, {})[session_id] = token
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".memspec_tokens_", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(tokens, out, indent=1, sort_keys=True)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {a: {s: t for s, t in v.items() if isinstance(t, str)} for a, v in data.items() if isinstance(v, dict)}
