"""What the decoder has recently seen: recent token ids and the target's hidden states.

These are the raw signals the predictor turns into a forecast. Both come for free: the tokens
are the output, and the target's final hidden states are computed by verification anyway.
The tracker keeps small rings of them; a :class:`ContextFeatures` is an immutable copy that
can cross threads (the scheduler's tick reads it while the decoder keeps writing).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ContextFeatures:
    """A frozen view of the recent context.

    ``hidden_last`` is the target's final hidden state that produced the newest token;
    ``hidden_mean`` the mean over the last few tokens (smoother: one token says little about a
    topic); ``tokens`` the most recent token ids, oldest first. Hidden states are ``None`` until
    the first verification of a session (a prompt alone has none yet).
    """

    tokens: tuple[int, ...]
    hidden_last: np.ndarray | None
    hidden_mean: np.ndarray | None
    turn_tokens: int
    """Tokens generated so far in the current turn (0 right after a new prompt)."""


class ContextTracker:
    """Ring buffers of recent tokens and hidden states, safe to read from another thread."""

    def __init__(self, token_window: int = 32, hidden_window: int = 8) -> None:
        self._lock = threading.Lock()
        self._tokens: deque[int] = deque(maxlen=token_window)
        self._hidden: deque[np.ndarray] = deque(maxlen=hidden_window)
        self._turn_tokens = 0

    def reset(self) -> None:
        """Forget everything (a new, unrelated session)."""
        with self._lock:
            self._tokens.clear()
            self._hidden.clear()
            self._turn_tokens = 0

    def new_turn(self, prompt_ids: Iterable[int]) -> None:
        """A new prompt arrived: its tokens become the most recent context."""
        with self._lock:
            self._tokens.extend(int(t) for t in prompt_ids)
            self._turn_tokens = 0

    def push(self, token_ids: Iterable[int], hidden: np.ndarray | None) -> None:
        """Record tokens emitted by a round and the hidden states that produced them."""
        ids = [int(t) for t in token_ids]
        with self._lock:
            self._tokens.extend(ids)
            self._turn_tokens += len(ids)
            if hidden is not None:
                h = np.asarray(hidden, dtype=np.float32)
                for row in h.reshape(-1, h.shape[-1]):
                    self._hidden.append(row)

    def features(self) -> ContextFeatures:
        """An immutable copy of the current signals."""
        with self._lock:
            if self._hidden:
                last = self._hidden[-1].copy()
                mean = np.mean(np.stack(self._hidden), axis=0)
            else:
                last = mean = None
            return ContextFeatures(tokens=tuple(self._tokens), hidden_last=last, hidden_mean=mean,
                                   turn_tokens=self._turn_tokens)
