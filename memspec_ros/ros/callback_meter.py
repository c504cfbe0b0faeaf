"""Per-callback cost on /diagnostics: time per call and calls per second, over a recent window.

Prediction and prefetch run in executor callbacks beside the decoding loop; an operator who
sees decoding slow down needs to know whether one of them is running hot (a forecast per round
instead of per check interval, a prefetch storm from failing loads) and what each call costs.
Only the most recent calls are kept, so a node that runs for weeks holds a fixed amount.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MeterReading:
    """A meter's figures now."""

    calls: int
    """Calls since the node was configured."""
    mean_s: float
    """Mean seconds per call over the recent calls (0 before the first)."""
    calls_per_s: float
    """Recent calls per second of wall time (0 when none happened within the window)."""


class CallbackMeter:
    """Counts and times the calls of one callback (wrap it with :meth:`timed`)."""

    def __init__(self, window: int = 64, horizon_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._recent: deque[tuple[float, float]] = deque(maxlen=window)  # (end time, seconds)
        self._horizon_s = horizon_s
        self._clock = clock
        self._calls = 0
        self._lock = threading.Lock()

    def timed(self, callback: Callable[..., Any]) -> Callable[..., Any]:
        """``callback`` that records each call's duration (also when it raises)."""

        def metered(*args: Any, **kwargs: Any) -> Any:
            t0 = self._clock()
            try:
                return callback(*args, **kwargs)
            finally:
                self.record(self._clock() - t0)

        return metered

    def record(self, seconds: float) -> None:
        """Account one call that took ``seconds``."""
        with self._lock:
            self._calls += 1
            self._recent.append((self._clock(), seconds))

    def reading(self) -> MeterReading:
        """Figures over the recent calls."""
        with self._lock:
            calls, recent = self._calls, list(self._recent)
        if not recent:
            return MeterReading(calls, 0.0, 0.0)
        now = self._clock()
        within = [t for t, _ in recent if now - t <= self._horizon_s]
        span = self._horizon_s
        if len(within) == self._recent.maxlen:  # the window filled within the horizon: rate over what it covers
            span = max(now - within[0], 1e-9)
        return MeterReading(calls, sum(s for _, s in recent) / len(recent), len(within) / span)
