"""Safe echoing of request text into logs, topics and rejection reasons.

A goal's fields and a context hint come from any process on the robot's network. Echoed
raw, they could paint an operator's terminal (ANSI escapes), forge log lines (newlines) or
flood the log (megabytes of hint). Everything the node repeats from a request goes through
:func:`echo`: bounded in length, with every non-printable character escaped.
"""

from __future__ import annotations

ECHO_LIMIT = 64
"""Characters of request text repeated back; enough to recognise it, too few to flood."""


def echo(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` quoted, non-printables escaped (``\\x1b``, ``\\n``, ``\\x9b``), cut to ``limit`` characters."""
    cut = text[:limit]
    shown = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in cut)
    more = f"... ({len(text)} characters)" if len(text) > limit else ""
    return f"'{shown.replace(chr(39), chr(92) + chr(39))}'{more}"
