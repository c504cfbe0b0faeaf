"""``memspec_generate --chat``: talk to the node line by line in one session.

Each line read is one user message, sent as a goal of one session, so the node keeps the
dialogue (and its KV cache) between lines; the answer streams as it is generated. Ctrl-C
while an answer streams cancels that goal only: the node ends it within one round, keeps
what was said in the session, and the loop asks for the next line. Ctrl-C at the prompt
discards the line being typed; end of input (Ctrl-D, or the end of a pipe) quits.

The loop only reads lines from a stream and writes to two streams, so a test drives it with a
pipe exactly as a terminal would (:func:`run_chat`); ``generate_cli`` wires it to the terminal.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TextIO

from memspec_interfaces.action import Generate

from memspec_ros.ros.generate_client import GenerateClient

PROMPT = "you> "
CANCEL_WAIT_S = 60.0
"""How long a cancelled goal may take to answer (the node stops within one round)."""


class LineSource(Protocol):
    """Anything lines are read from: a terminal, a pipe, a file."""

    def readline(self) -> str: ...


@dataclass
class ChatStreams:
    """Where the loop reads lines and writes answers (stdout) and status (stderr)."""

    lines: LineSource
    out: TextIO
    err: TextIO
    interactive: bool = False
    """Show the ``you>`` prompt (a terminal); a pipe gets the answers alone."""


def new_session_id() -> str:
    """A session id for a chat that was started without ``--session``."""
    return f"chat-{secrets.token_hex(6)}"


def run_chat(client: GenerateClient, make_goal: Callable[[str, bool], Generate.Goal], streams: ChatStreams,
             on_token: Callable[[str], None] = lambda _token: None, timeout_s: float = 30.0) -> int:
    """Read lines until end of input; each is a turn of the session ``make_goal`` names.

    ``make_goal(text, first)`` builds the goal of one line (``first``: the session's first
    line in this loop, which carries the system prompt). ``on_token`` is told the session's
    token after every turn (the CLI remembers it for a later run). Returns 0, or 3 when a goal
    was rejected (the loop goes on; the exit status tells a script).
    """
    status, first = 0, True
    while True:
        line = _read_line(streams)
        if line is None:
            return status
        text = line.rstrip("\n")
        if not text.strip():
            continue
        call = client.send(make_goal(text, first), on_text=lambda text: _write(streams.out, text))
        try:
            accepted = call.wait_accepted(timeout_s)
            result = call.wait(timeout_s=24 * 3600) if accepted else None
        except KeyboardInterrupt:  # Ctrl-C: cancel this answer only (the node keeps the session)
            streams.err.write("\n[cancelling]\n")
            streams.err.flush()
            accepted = call.wait_accepted(timeout_s)
            if accepted:
                call.cancel()
            result = call.wait(timeout_s=CANCEL_WAIT_S) if accepted else None
        if result is None:
            try:
                reason = client.describe_rejection(call)
            except KeyboardInterrupt:  # a Ctrl-C while waiting for the reason: the chat goes on
                reason = "Ctrl-C before its reason arrived"
            streams.err.write(f"[goal rejected: {reason}]\n")
            streams.err.flush()
            status = 3
            continue
        first = False
        if result.session_token:
            on_token(result.session_token)
        _write(streams.out, "\n")
        streams.err.write(f"[{result.finish_reason}: {result.num_tokens} tokens, "
                          f"{result.tokens_per_second:.1f} tokens/s"
                          + (f", session restarted: {result.session_restart_reason}"
                             if result.session_restart_reason else "") + "]\n")
        streams.err.flush()


def _read_line(streams: ChatStreams) -> str | None:
    """The next line, or None at end of input; Ctrl-C at the prompt starts the line over."""
    while True:
        if streams.interactive:
            _write(streams.out, PROMPT)
        try:
            line = streams.lines.readline()
        except KeyboardInterrupt:
            _write(streams.out, "\n")
            continue
        return line or None


def _write(stream: TextIO, text: str) -> None:
    stream.write(text)
    stream.flush()
