"""The bounds of every tuning knob, declared once.

The engine, the runtime's configuration, the node's parameter descriptors and the bench's
command line all check the same knobs. Before this table each kept its own numbers and they
disagreed (the engine took k up to 64, the node up to 16), so a value could pass one layer and
be refused by the next with a different message. This module has no dependencies so that every
layer, core included, can import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class KnobBound:
    """A closed range ``[low, high]`` for one knob, and the one message that refuses a value."""

    name: str
    low: float
    high: float
    integer: bool = True

    def problem(self, value: object) -> str | None:
        """Why ``value`` is not allowed, or ``None`` when it is."""
        if self.integer:
            ok = isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high
            kind = "an int"
        else:
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                  and self.low <= value <= self.high)
            kind = "a number"
        if ok:
            return None
        return f"{self.name} must be {kind} in [{self._fmt(self.low)}, {self._fmt(self.high)}], got {value!r}"

    def check(self, value: object) -> None:
        """Raise ``ValueError`` with :meth:`problem`'s message when ``value`` is out of bounds."""
        problem = self.problem(value)
        if problem is not None:
            raise ValueError(problem)

    def _fmt(self, v: float) -> str:
        return str(int(v)) if self.integer else f"{v:g}"


K = KnobBound("k", 1, 16)
"""Draft tokens proposed per round. Past 16 no draft of a small zoo keeps an acceptance run
going, so a larger value is a caller's mistake rather than a tuning choice."""

CHECK_INTERVAL = KnobBound("check_interval", 1, 64)
"""Speculative rounds between scheduling decisions."""

K_SETTING = KnobBound("num_speculative_tokens", 0, K.high)
"""The node's k parameter: 0 = auto (chosen at configure, see runtime/speculation_choice)."""

CHECK_INTERVAL_SETTING = KnobBound("check_interval", 0, CHECK_INTERVAL.high)
"""The node's check interval parameter: 0 = auto (chosen at configure, see runtime/speculation_choice)."""

BUDGET_DRAFTS = KnobBound("budget_drafts", 0, 64)
"""Memory budget as a number of the largest drafts (0: a byte budget is used instead)."""

NUM_THREADS = KnobBound("num_threads", 0, 256)
"""torch intra-op threads for decoding; 0 = auto (measured at configure, see core/thread_tuning)."""

BUDGET_BYTES = KnobBound("budget_bytes", 0, 2**62)
"""Memory budget in bytes."""

STORAGE_BANDWIDTH_MBPS = KnobBound("storage_bandwidth_mbps", 0.0, 1.0e5, integer=False)
"""Emulated storage read bandwidth in MB/s (0: native speed)."""

LOAD_TIMEOUT_S = KnobBound("load_timeout_s", 0.1, 3600.0, integer=False)
"""Seconds after which a draft load is abandoned."""

NGRAM_N = KnobBound("ngram_n", 1, 16)
"""Tokens an n-gram member matches (its ``min_n`` and ``max_n``): one token matches almost
anywhere (proposals then mostly fail), past 16 a repeat is a copy the shorter n finds too."""
