"""Exception types raised by the core layer.

Every error carries a message that says what was wrong *and* what to do about it, because
these errors surface in ROS action results and logs where nobody has a debugger attached.
All derive from :class:`MemspecError` so callers can catch the whole family at once.
"""

from __future__ import annotations


class MemspecError(Exception):
    """Base class for every error raised deliberately by memspec_ros."""


class ModelLoadError(MemspecError):
    """A model or tokenizer directory could not be loaded (missing, malformed, wrong place)."""


class UnsafeModelFileError(ModelLoadError):
    """The directory only offers pickle-based weights, which can execute code when loaded."""


class VocabularyMismatchError(MemspecError):
    """A draft's vocabulary differs from the target's, so its proposals would be meaningless.

    Speculative decoding compares draft and target token ids position by position; that is
    only sound when both models map ids to the same strings.
    """

    def __init__(self, draft_name: str, reason: str) -> None:
        self.draft_name = draft_name
        self.reason = reason
        super().__init__(
            f"draft {draft_name!r} cannot be used with this target: {reason}. "
            "A draft must share the target's tokenizer (same vocabulary and special tokens)."
        )


class InvalidRequestError(MemspecError, ValueError):
    """A generation request or sampling parameter is out of range.

    Also a ``ValueError`` so generic callers that validate inputs catch it naturally.
    """


class ModelConfigError(ModelLoadError):
    """A model's ``config.json`` asks for absurd sizes or does not describe its own weights.

    Raised before anything is allocated: a config decides how much memory building the
    model takes, and it is a file we were merely pointed at.
    """
