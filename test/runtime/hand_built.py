"""Hand-built runtime state for millisecond policy and scheduler tests (no models, no files).

A :class:`Stage` is three catalogued drafts without weights (a spec carries only a name, a
domain and a size), the real :class:`DraftPool`, acceptance and context trackers, and the
simulator's :class:`VirtualLoader` on a virtual clock. Tests put drafts into memory, record
rounds and build the exact :class:`PolicyView` a runtime would hand a policy, then check what
the policy decides. A draft's "model" in the pool is a plain object: policies never touch it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memspec_ros.runtime.acceptance import AcceptanceTracker, RoundRecord
from memspec_ros.runtime.catalogue import Budget, Catalogue, DraftSpec
from memspec_ros.runtime.context import ContextTracker
from memspec_ros.runtime.policies.base import PolicyView
from memspec_ros.runtime.pool import DraftPool
from memspec_ros.runtime.predictor import TOKEN_BUCKETS, DraftPredictor
from memspec_ros.runtime.virtual_time import VirtualClock, VirtualLoader

DRAFTS = (("draft-general", "general"), ("draft-code", "code"), ("draft-legal", "legal"))
SIZE = 1000
HIDDEN = 4


class Stage:
    """Three drafts of equal size under a budget of ``budget_drafts`` of them."""

    def __init__(self, budget_drafts: int | None = 2, *, ngram: str | None = None) -> None:
        self.catalogue = Catalogue(DraftSpec(n, Path("/nowhere") / n, d, SIZE) for n, d in DRAFTS)
        self.budget = Budget.drafts(budget_drafts) if budget_drafts else Budget.unlimited()
        self.clock = VirtualClock()
        self.pool = DraftPool(self.catalogue, self.budget, clock=self.clock)
        self.loader = VirtualLoader(self.pool, self.clock, dict.fromkeys(self.catalogue.names, 1.0))
        self.ngram = ngram
        """The n-gram member's name when the stage has it on (as a runtime with ``RuntimeConfig.ngram``)."""
        self.tracker = AcceptanceTracker([*self.catalogue.names, *([ngram] if ngram else [])])
        self.context = ContextTracker()
        self.round_index = 0
        self.hint: str | None = None
        self.unusable: frozenset[str] = frozenset()
        self.remaining = 64
        self.turn_position = 0
        self.mean_load_s: float | None = None

    @property
    def names(self) -> list[str]:
        return self.catalogue.names

    def load(self, *names: str) -> None:
        """Make drafts resident at once (as a finished load would)."""
        for n in names:
            self.pool.begin_load(n)
            self.pool.complete_load(n, object())

    def run(self, draft: str | None, proposed: int = 4, accepted: int = 0, *, draft_s: float = 0.01,
            verify_s: float = 0.02, loading: bool = False) -> None:
        """Record one finished round (what the runtime's tracker sees)."""
        self.tracker.record(RoundRecord(round_index=self.round_index, draft=draft, proposed=proposed,
                                        accepted=accepted, emitted=accepted + 1, seconds=draft_s + verify_s,
                                        draft_s=draft_s if draft else 0.0, verify_s=verify_s, loading=loading))
        self.round_index += 1

    def view(self, *, k: int = 4, ngram_match: int = 0) -> PolicyView:
        """What a policy would see now."""
        return PolicyView(now=self.clock.now, round_index=self.round_index, turn=0,
                          turn_position=self.turn_position, remaining=self.remaining, k=k,
                          residency=self.pool.snapshot(), pending_loads=tuple(self.loader.pending()),
                          acceptance=self.tracker.summary(), context=self.context.features(), hint=self.hint,
                          unusable=self.unusable, catalogue=self.catalogue, budget=self.budget,
                          mean_load_s=self.mean_load_s, ngram=self.ngram, ngram_match=ngram_match)


def constant_predictor(forecast: dict[str, float], names: Sequence[str]) -> DraftPredictor:
    """A predictor whose model forecasts ``forecast`` whatever the context (zero weights)."""
    d = 2 * HIDDEN + TOKEN_BUCKETS
    probs = np.array([forecast.get(n, 0.01) for n in names], dtype=np.float64)
    bias = np.log(probs / (1.0 - probs))
    return DraftPredictor(list(names), HIDDEN, np.zeros((d, len(names))), bias, np.zeros(d), np.ones(d))
