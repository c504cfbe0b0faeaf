"""Running acceptance statistics per draft, the feedback every policy learns from.

All policies see the same numbers: per draft, an exponential moving average of the acceptance
rate over the rounds it ran (recent rounds matter most: topics shift), lifetime totals, and
when it last ran. The tracker is written by the decoding thread and read by the scheduler's
tick, hence the lock and the frozen summaries.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DraftAcceptance:
    """Acceptance of one draft as observed so far."""

    ema: float | None
    """Moving average of accepted/proposed over its recent rounds (None: never ran)."""
    rounds: int
    proposed: int
    accepted: int
    last_round: int | None
    """Global round index of its latest round (None: never ran)."""

    @property
    def rate(self) -> float | None:
        """Lifetime accepted/proposed."""
        return self.accepted / self.proposed if self.proposed else None


@dataclass(frozen=True)
class RoundRecord:
    """One round as the statistics window remembers it."""

    round_index: int
    draft: str | None
    proposed: int
    accepted: int
    emitted: int
    seconds: float
    draft_s: float = 0.0
    verify_s: float = 0.0
    loading: bool = False
    """A draft load was in flight while the round ran (the loader shares the CPU with decoding)."""


@dataclass(frozen=True)
class AcceptanceSummary:
    """Frozen copy of the tracker: per-draft figures and the most recent rounds."""

    per_draft: Mapping[str, DraftAcceptance]
    window: tuple[RoundRecord, ...]
    rounds: int
    step_s: Mapping[str, float]
    """Moving average of each draft's seconds per proposed token (drafts that ran)."""
    verify_s: float | None
    """Moving average of a verification's seconds (speculative rounds)."""
    target_step_s: float | None
    """Moving average of a target-only round's engine seconds."""
    quiet_verify_s: float | None = None
    """Moving average of a verification's seconds while no load was in flight."""
    loading_verify_s: float | None = None
    """The same while a load was in flight."""

    @property
    def loading_slowdown(self) -> float | None:
        """How much slower decoding runs while a draft loads (1.0 = not at all; None: not measured yet).

        Reading and materialising a draft takes CPU and memory bandwidth from the decoding
        thread; on a small machine that is most of what a background load costs.
        """
        if not self.quiet_verify_s or self.loading_verify_s is None:
            return None
        return max(1.0, self.loading_verify_s / self.quiet_verify_s)

    def expected_tokens_per_s(self, name: str | None, rate: float, k: int) -> float | None:
        """Engine tokens/s of a round with ``name`` at acceptance ``rate`` (None: target-only).

        ``(rate * k + 1) / (k * step + verify)``, from measured times; None until measured.
        """
        if name is None:
            t = self.target_step_s if self.target_step_s is not None else self.verify_s
            return 1.0 / t if t else None
        step = self.step_s.get(name)
        if step is None or self.verify_s is None:
            return None
        return (rate * k + 1.0) / (k * step + self.verify_s)

    def ema(self, name: str, default: float | None = None) -> float | None:
        """EMA acceptance of ``name`` or ``default`` if it never ran."""
        d = self.per_draft.get(name)
        return d.ema if d is not None and d.ema is not None else default


class AcceptanceTracker:
    """Accumulates :class:`RoundRecord` s; thread-safe."""

    def __init__(self, names: Iterable[str], alpha: float = 0.3, window: int = 64) -> None:
        self._lock = threading.Lock()
        self._names = list(names)
        self.alpha = alpha
        self._window: deque[RoundRecord] = deque(maxlen=window)
        self._ema: dict[str, float | None] = dict.fromkeys(self._names)
        self._rounds = dict.fromkeys(self._names, 0)
        self._proposed = dict.fromkeys(self._names, 0)
        self._accepted = dict.fromkeys(self._names, 0)
        self._last: dict[str, int | None] = dict.fromkeys(self._names)
        # Per-draft summaries, rebuilt only for the draft a round changed: a summary is taken
        # every round, and with a large catalogue rebuilding every draft's was most of its cost.
        self._per: dict[str, DraftAcceptance] = {n: self._draft_summary(n) for n in self._names}
        self._step: dict[str, float] = {}
        self._verify: float | None = None
        self._verify_by_loading: dict[bool, float] = {}
        self._target: float | None = None
        self._n = 0

    def record(self, rec: RoundRecord) -> None:
        """Add one round."""
        with self._lock:
            self._window.append(rec)
            self._n += 1
            d = rec.draft
            if d is None or rec.proposed <= 0 or d not in self._ema:
                if rec.verify_s > 0:
                    self._target = _ema(self._target, rec.verify_s, self.alpha)
                return
            if rec.draft_s > 0:
                self._step[d] = _ema(self._step.get(d), rec.draft_s / rec.proposed, self.alpha)
            if rec.verify_s > 0:
                self._verify = _ema(self._verify, rec.verify_s, self.alpha)
                self._verify_by_loading[rec.loading] = _ema(self._verify_by_loading.get(rec.loading),
                                                            rec.verify_s, self.alpha)
            rate = rec.accepted / rec.proposed
            prev = self._ema[d]
            self._ema[d] = rate if prev is None else (1 - self.alpha) * prev + self.alpha * rate
            self._rounds[d] += 1
            self._proposed[d] += rec.proposed
            self._accepted[d] += rec.accepted
            self._last[d] = rec.round_index
            self._per[d] = self._draft_summary(d)

    def _draft_summary(self, name: str) -> DraftAcceptance:
        return DraftAcceptance(ema=self._ema[name], rounds=self._rounds[name], proposed=self._proposed[name],
                               accepted=self._accepted[name], last_round=self._last[name])

    def summary(self) -> AcceptanceSummary:
        """A frozen copy for policies and statistics messages."""
        with self._lock:
            return AcceptanceSummary(per_draft=dict(self._per), window=tuple(self._window), rounds=self._n,
                                     step_s=dict(self._step), verify_s=self._verify, target_step_s=self._target,
                                     quiet_verify_s=self._verify_by_loading.get(False),
                                     loading_verify_s=self._verify_by_loading.get(True))


def _ema(prev: float | None, value: float, alpha: float) -> float:
    return value if prev is None else (1 - alpha) * prev + alpha * value
