"""Why a turn ended, as one enum shared by the engine, the runtime and the node.

A string per layer ("eos" in the engine, "cancelled" in the runtime, "aborted: ..." in the
node) let each layer invent its own spelling, and the node had to work out by itself whether
a stopped turn was a client's cancel or a deactivate. One ``StrEnum`` keeps the spellings in
one place; its values are the strings the layers used before, so stored traces and reports
that hold plain strings still compare equal. They are also the Generate result's
``finish_reason`` field, so clients branch on a value instead of parsing ``message``.
"""

from __future__ import annotations

from enum import StrEnum


class FinishReason(StrEnum):
    """How a dialogue turn ended."""

    EOS = "eos"
    """The target emitted an end-of-sequence token."""
    LENGTH = "length"
    """``max_new_tokens`` were generated."""
    STOP = "stop"
    """A stop string appeared in the output (the output ends right before it)."""
    CANCELLED = "cancelled"
    """The caller asked the turn to stop (a client's cancel)."""
    DEACTIVATED = "deactivated"
    """The server stopped the turn: the node was deactivated, cleaned up or shut down (called
    ``STOPPED``/"stopped" before stop strings existed, which made "stop" and "stopped" mean
    two different things)."""
    ERROR = "error"
    """The turn failed half-way and was rolled back to the previous completed turn."""

    @property
    def interrupted(self) -> bool:
        """True for a turn that did not run to its natural end (cancel or stop)."""
        return self in (FinishReason.CANCELLED, FinishReason.DEACTIVATED)
