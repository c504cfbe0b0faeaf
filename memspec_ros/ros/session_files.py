"""Dialogue sessions on disk, so that a restarted node continues them (``session_dir``).

A robot's node restarts: a crash, a software update, a power cycle. Without this, every
dialogue in progress is lost and every client's next turn is refused or starts over. Each
session is one small JSON file holding what rebuilds its context exactly (the tokens the
target has seen and, for a chat session, its messages: :class:`ConversationRecord`), never
its KV cache (one prefill rebuilds that, and it would take megabytes per session).

Durability rules:

* A file is written after every completed turn, atomically: a temporary file in the same
  folder, flushed and fsynced, then ``os.replace`` over the old one and the folder fsynced.
  A node killed at any moment (SIGKILL, power loss) leaves the previous file or the new one,
  never a mix; a turn in progress is not written, so at most that turn is lost.
* Ownership survives: the file holds a SHA-256 digest of the session's token, never the token
  (a token is 24 random bytes, so a plain digest cannot be reversed by guessing), and the
  node compares digests.
* File names are the SHA-256 of the session id: any id (slashes, dots, 4 KB of text) makes a
  safe name, and the id inside the file must hash to its name, so a file copied or renamed
  into the folder is refused rather than served under the wrong id.
* Tokens only mean something to the tokenizer that made them, so each file names the model it
  was made with (:func:`model_fingerprint`); a file of another model is skipped.
* A file that is unreadable, of another format or another model is skipped and reported (the
  caller logs its name); it is left in place, as it may be another version's data.

No ROS here: the node owns the folder's location and the limits (:mod:`.dialogue_store`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memspec_ros.runtime.chat import ChatMessage
from memspec_ros.runtime.conversation import ConversationRecord

FORMAT = "memspec_session/1"
SUFFIX = ".json"
TEMP_PREFIX = ".tmp-"
"""Temporary files of a write in progress; one left behind was cut short by a crash."""
LOCK_NAME = ".lock"
"""The file :class:`SessionDirLock` locks (not a session file)."""
KEPT_BESIDE = ".safetensors"
"""Files of this suffix in a node's session folder are the node's other state (the online
learner's, :mod:`memspec_ros.runtime.online_state`): left alone, not reported as stray files."""
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
               "tokenizer.model")
"""The files of a model folder that decide what a token id means."""


def file_name(session_id: str) -> str:
    """The file name of ``session_id``: the hex SHA-256 of its UTF-8 bytes, safe for any id."""
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest() + SUFFIX


def model_fingerprint(model_dir: Path) -> str:
    """A digest of the files that give the model's token ids their meaning (config, tokenizer)."""
    digest = hashlib.sha256()
    for name in MODEL_FILES:
        path = Path(model_dir) / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@dataclass(frozen=True)
class SavedSession:
    """One session as it is written: who owns it, when it was last used, its context."""

    session_id: str
    token_digest: str
    """Hex SHA-256 of the session's token (see :func:`memspec_ros.ros.dialogue_store.token_digest`)."""
    conversation: ConversationRecord
    last_used: float
    """Wall-clock time (``time.time()``) of its last goal: the idle timeout continues across a restart."""


@dataclass(frozen=True)
class SkippedFile:
    """A file of the folder that was not loaded, and why."""

    path: Path
    reason: str


class SessionFileStore:
    """One folder of session files, for one model."""

    def __init__(self, directory: Path, model: str, vocab_size: int | None = None) -> None:
        """``model``: the :func:`model_fingerprint` of the served target; ``vocab_size``: its
        number of token ids (a file with an id outside it is refused, not prefilled)."""
        self.directory = Path(directory)
        self.model = model
        self.vocab_size = vocab_size

    def path_for(self, session_id: str) -> Path:
        return self.directory / file_name(session_id)

    def save(self, session: SavedSession) -> None:
        """Write ``session`` atomically (temp file, fsync, replace, fsync of the folder); mode 0600."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = json.dumps(_to_json(session, self.model), ensure_ascii=False, separators=(",", ":"))
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=SUFFIX, dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path_for(session.session_id))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._sync_directory()

    def delete(self, session_id: str) -> None:
        """Remove ``session_id``'s file, if any (a closed or dropped session)."""
        try:
            self.path_for(session_id).unlink()
        except FileNotFoundError:
            return
        self._sync_directory()

    def load_all(self) -> tuple[list[SavedSession], list[SkippedFile]]:
        """Every readable session of this model (oldest use first), and the files skipped with why.

        Temporary files a crash left behind are removed: their write never completed, and the
        file they would have replaced is still there.
        """
        if not self.directory.is_dir():
            return [], []
        sessions: list[SavedSession] = []
        skipped: list[SkippedFile] = []
        for path in sorted(self.directory.iterdir()):
            if path.name.startswith(TEMP_PREFIX):
                path.unlink(missing_ok=True)
                continue
            if path.suffix == KEPT_BESIDE or path.name == LOCK_NAME:
                continue  # online learning's state (memspec_ros.runtime.online_state), the folder's lock
            if not path.is_file() or path.suffix != SUFFIX:
                skipped.append(SkippedFile(path, "not a session file (ignored)"))
                continue
            try:
                session = _from_json(json.loads(path.read_text(encoding="utf-8")), self.model, self.vocab_size)
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                skipped.append(SkippedFile(path, f"unreadable: {type(exc).__name__}: {exc}"))
                continue
            except ForeignFile as exc:
                skipped.append(SkippedFile(path, str(exc)))
                continue
            if file_name(session.session_id) != path.name:
                skipped.append(SkippedFile(path, "its session id does not match its file name (copied or renamed?)"))
                continue
            sessions.append(session)
        sessions.sort(key=lambda s: s.last_used)
        return sessions, skipped

    def _sync_directory(self) -> None:
        """fsync the folder, so that a rename or unlink survives a power loss."""
        try:
            fd = os.open(self.directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass  # some file systems refuse fsync on a folder; the rename is still atomic
        finally:
            os.close(fd)


class ForeignFile(ValueError):
    """A file that is not a session of this node's format and model."""


def _to_json(session: SavedSession, model: str) -> dict[str, Any]:
    c = session.conversation
    return {
        "format": FORMAT,
        "model": model,
        "session_id": session.session_id,
        "token_sha256": session.token_digest,
        "last_used": session.last_used,
        "chat": c.chat,
        "turns": c.turns,
        "token_ids": list(c.token_ids),
        "messages": [[m.role, m.content] for m in c.messages],
    }


def _from_json(data: object, model: str, vocab_size: int | None) -> SavedSession:
    """Parse and check one file's content; raises :class:`ForeignFile` saying what is wrong."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ForeignFile(f"not a {FORMAT} file")
    if data.get("model") != model:
        raise ForeignFile("made for another model (its tokens would mean something else to this target)")
    sid, digest, last_used = data.get("session_id"), data.get("token_sha256"), data.get("last_used")
    chat, turns, ids, messages = data.get("chat"), data.get("turns"), data.get("token_ids"), data.get("messages")
    problems = [
        not isinstance(sid, str) or not sid,
        not isinstance(digest, str) or len(digest) != 64,
        not isinstance(last_used, (int, float)) or isinstance(last_used, bool),
        not isinstance(chat, bool),
        not isinstance(turns, int) or isinstance(turns, bool) or turns < 0,
        not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids),
        not isinstance(messages, list) or not all(
            isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m) for m in messages),
    ]
    if any(problems):
        raise ForeignFile("a field is missing or has the wrong type")
    if vocab_size is not None and any(t >= vocab_size for t in ids):
        raise ForeignFile(f"holds token ids outside this target's vocabulary of {vocab_size}")
    record = ConversationRecord(chat=chat, turns=turns, token_ids=tuple(ids),
                                messages=tuple(ChatMessage(r, c) for r, c in messages))
    return SavedSession(session_id=sid, token_digest=digest, conversation=record, last_used=float(last_used))


def session_dir_path(value: str) -> Path | None:
    """The folder the ``session_dir`` parameter names; None when it is empty (sessions in memory only).

    ``$ROS_HOME`` stands for the ROS home folder (the ``ROS_HOME`` environment variable, or
    ``~/.ros`` when it is unset, as ROS itself does); other ``$VARIABLES`` and ``~`` expand too.
    """
    if not value.strip():
        return None
    ros_home = os.environ.get("ROS_HOME") or str(Path.home() / ".ros")
    value = value.replace("${ROS_HOME}", ros_home).replace("$ROS_HOME", ros_home)
    return Path(os.path.expanduser(os.path.expandvars(value)))


def node_session_dir(base: Path, node_name: str, domain_id: int) -> Path:
    """The folder of one node's sessions: ``base`` / ``domain_<ROS_DOMAIN_ID>`` / its fully
    qualified name (``/robot1/memspec`` on domain 0 -> ``base/domain_0/robot1/memspec``).

    Two nodes on one machine share ``$ROS_HOME``: two robots' namespaces, or two nodes of the
    same name on different ROS domains (two robots simulated on one computer). In one folder each
    would load the other's sessions at configure and delete the other's files when its own
    limits drop sessions. ROS node names are letters, digits, ``_`` and ``/``: safe as a path.
    Two nodes of one name on one domain are a naming error ROS itself warns about; the folder's
    lock (:class:`SessionDirLock`) refuses the second.
    """
    parts = [p for p in node_name.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise ValueError(f"not a node name: {node_name!r}")
    if domain_id < 0:
        raise ValueError(f"not a ROS domain id: {domain_id}")
    return base.joinpath(f"domain_{domain_id}", *parts)


class SessionDirLock:
    """An exclusive lock on a session folder for as long as one node serves from it.

    ``fcntl.flock`` on ``<folder>/.lock``: released by the kernel when the process ends, however
    it ends, so a node killed with SIGKILL never leaves a stale lock behind.
    """

    def __init__(self, folder: Path) -> None:
        import fcntl

        self.path = folder / LOCK_NAME
        self._fh = self.path.open("a+")
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._fh.seek(0)
            holder = self._fh.read().strip() or "another process"
            self._fh.close()
            raise OSError(f"{folder} is in use by {holder}: another node with this name on this ROS domain "
                          "serves its sessions; give this node another name or namespace, or another "
                          "session_dir") from None
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(f"pid {os.getpid()}\n")
        self._fh.flush()

    def release(self) -> None:
        """Unlock (idempotent)."""
        if not self._fh.closed:
            self._fh.close()


def prepare_session_dir(path: Path) -> None:
    """Create the folder (mode 0700: the files hold dialogues) and check it is writable; raises OSError."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"{path} is not writable by this user")
