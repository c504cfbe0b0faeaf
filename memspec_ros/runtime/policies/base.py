"""The one interface every draft-scheduling policy implements.

A policy makes two kinds of decision, on two clocks:

* :meth:`Policy.choose` - *per round*, in the decoding thread, cheap: which draft runs this
  round (``None``: a target-only round), and whether to wait for a draft that is not resident
  yet (a *stall*). MemSpec never waits; the adaptive baselines do, which is the paper's point.
* :meth:`Policy.plan` - *periodically* (every ``check_interval`` rounds, or from a timer in the
  ROS node, in another thread): forecasts, and the working set it wants (what to prefetch,
  what may be evicted, which loads to abandon). A :class:`~memspec_ros.runtime.scheduler.Scheduler`
  carries the plan out; policies never touch the pool or the loader themselves.

:meth:`Policy.observe` feeds each finished round back. Every policy receives the same
:class:`PolicyView` and :class:`RoundFeedback`: the same information, used differently.
All three entry points take the policy's lock, so ``plan`` may run concurrently with the
decoding thread.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from ..acceptance import AcceptanceSummary
from ..catalogue import Budget, Catalogue
from ..context import ContextFeatures
from ..residency import DraftState, ResidencySnapshot
from ..throughput_guard import GuardStatus


@dataclass(frozen=True)
class PolicyView:
    """Everything a policy may look at, frozen at one instant."""

    now: float
    round_index: int
    """Rounds run so far by this runtime (all sessions)."""
    turn: int
    """Index of the current dialogue turn within the session."""
    turn_position: int
    """Tokens generated so far in the current turn (where the next round starts)."""
    remaining: int
    """Tokens the current turn may still emit (0 between turns)."""
    k: int
    residency: ResidencySnapshot
    pending_loads: tuple[str, ...]
    acceptance: AcceptanceSummary
    context: ContextFeatures
    hint: str | None
    unusable: frozenset[str]
    """Drafts whose loads failed: policies must not count on them."""
    catalogue: Catalogue
    budget: Budget
    mean_load_s: float | None = None
    """Mean storage-to-resident time of the loads so far (None before the first)."""
    ngram: str | None = None
    """Name of the n-gram member (:mod:`..ngram_member`) when it is on: always resident at 0 bytes,
    never loaded or evicted, so it is not among ``resident`` or ``usable()`` (which the working
    set is planned over); a policy may choose it for any round."""
    ngram_match: int = 0
    """Tokens the n-gram member would propose this round (0: its lookup finds no match, so a round
    with it would be a plain target step); the runtime looks up before every round."""

    @property
    def load_cost_s(self) -> float | None:
        """Decoding time one background load costs, as measured: its duration times how much
        slower rounds ran while loads were in flight (None until both were measured)."""
        slowdown = self.acceptance.loading_slowdown
        if self.mean_load_s is None or slowdown is None:
            return None
        return self.mean_load_s * (slowdown - 1.0)

    @property
    def resident(self) -> list[str]:
        """Drafts usable this instant."""
        return self.residency.names_in(DraftState.RESIDENT)

    @property
    def active(self) -> str | None:
        """The draft that ran the previous round, if it is still in memory."""
        return self.residency.active

    def is_resident(self, name: str) -> bool:
        """Whether ``name`` is usable this instant."""
        return self.residency.state(name) == DraftState.RESIDENT

    def usable(self) -> list[str]:
        """Catalogued drafts not marked unusable, in catalogue order."""
        return [n for n in self.catalogue.names if n not in self.unusable]

    def draft_for_domain(self, domain: str | None) -> str | None:
        """The draft serving ``domain`` (or named ``domain``), if any."""
        if domain is None:
            return None
        if domain in self.catalogue:
            return domain
        spec = self.catalogue.by_domain(domain)
        return spec.name if spec else None


@dataclass(frozen=True)
class RoundFeedback:
    """What a finished round revealed."""

    round_index: int
    turn: int
    turn_position: int
    draft: str | None
    proposed: int
    accepted: int
    emitted: int
    seconds: float
    counterfactual: Mapping[str, int] | None = None
    """For policies that ask for it: tokens each *other resident* draft would have had accepted
    on the tokens the target just verified (full-information feedback, as HedgeSpec uses)."""


@dataclass(frozen=True)
class Decision:
    """A per-round choice: run ``draft`` (``None``: target-only); ``wait`` = stall for its load."""

    draft: str | None
    wait: bool = False
    k: int | None = None
    """Tokens to propose this round, at most the runtime's k (None: the runtime's k)."""


@dataclass(frozen=True)
class SchedulePlan:
    """A periodic plan for the working set, carried out by the scheduler.

    ``want`` lists drafts to have in memory, most important first: missing ones are loaded in
    that order, as long as room can be made by evicting drafts from ``evictable`` (in that
    order). Pending loads in ``cancel`` are abandoned. ``predictions`` are need scores in [0, 1]
    to publish (empty if the policy has none).
    """

    want: tuple[str, ...] = ()
    evictable: tuple[str, ...] = ()
    cancel: tuple[str, ...] = ()
    predictions: Mapping[str, float] = field(default_factory=dict)
    urgent: bool = False
    """Load ``want[0]`` ahead of prefetches: the policy is about to wait for it."""


class Policy(ABC):
    """Base class: locking, binding to a catalogue, and the three entry points."""

    name: ClassVar[str] = "policy"
    needs_predictor: ClassVar[bool] = False
    """Built with a trained :class:`~memspec_ros.runtime.predictor.DraftPredictor`: the one
    place that says so, read by the factory, the node's parameter checks and the bench."""
    wants_counterfactual: ClassVar[bool] = False
    unlimited_memory: ClassVar[bool] = False

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.catalogue: Catalogue | None = None
        self.budget: Budget | None = None
        self.k = 4

    def bind(self, catalogue: Catalogue, budget: Budget, k: int) -> None:
        """Attach to a runtime's catalogue and budget (called once, before anything else)."""
        with self._lock:
            self.catalogue = catalogue
            self.budget = budget
            self.k = k
            self._on_bind()

    def _on_bind(self) -> None:  # noqa: B027 - optional hook
        """Subclass hook run by :meth:`bind`."""

    def initial_working_set(self) -> list[str]:
        """Drafts to load before the first timed round (same default for every policy).

        The generalist first (the one draft a single-draft system would ship), then catalogue
        order, as many as fit the budget.
        """
        assert self.catalogue is not None and self.budget is not None
        names = self.catalogue.names
        general = [n for n in names if self.catalogue.get(n).domain in ("mixed", "general")]
        order = general + [n for n in names if n not in general]
        return fill_budget(order, self.catalogue, self.budget)

    def choose(self, view: PolicyView) -> Decision:
        """Per-round decision (decoding thread)."""
        with self._lock:
            return self._choose(view)

    def observe(self, feedback: RoundFeedback, view: PolicyView) -> None:
        """Learn from a finished round (decoding thread)."""
        with self._lock:
            self._observe(feedback, view)

    def plan(self, view: PolicyView) -> SchedulePlan:
        """Periodic working-set decision (scheduler tick; any thread)."""
        with self._lock:
            return self._plan(view)

    def new_turn(self, view: PolicyView) -> None:
        """A new prompt arrived (topic may have shifted)."""
        with self._lock:
            self._new_turn(view)

    def _new_turn(self, view: PolicyView) -> None:  # noqa: B027 - optional hook
        """Subclass hook for :meth:`new_turn`."""

    def guard_status(self) -> GuardStatus | None:
        """The do-no-harm guard's state for policies that have one (:mod:`..throughput_guard`); None here."""
        return None

    @abstractmethod
    def _choose(self, view: PolicyView) -> Decision: ...

    def _observe(self, feedback: RoundFeedback, view: PolicyView) -> None:  # noqa: B027 - optional hook
        """Default: the shared acceptance tracker is enough."""

    @abstractmethod
    def _plan(self, view: PolicyView) -> SchedulePlan: ...


# ---------------------------------------------------------------------- shared helpers
def fill_budget(order: Sequence[str], catalogue: Catalogue, budget: Budget) -> list[str]:
    """Greedily take drafts from ``order`` while the budget admits them together."""
    chosen: list[str] = []
    for n in order:
        sizes = [catalogue.get(c).size_bytes for c in chosen] + [catalogue.get(n).size_bytes]
        if budget.admits(sizes):
            chosen.append(n)
    return chosen


def best_of(names: Sequence[str], score: Mapping[str, float], prefer: str | None = None,
            margin: float = 0.0) -> str | None:
    """Highest-scoring name; ``prefer`` wins unless beaten by more than ``margin`` (hysteresis)."""
    if not names:
        return None
    best = max(names, key=lambda n: (score.get(n, 0.0), n == prefer))
    if prefer in names and score.get(best, 0.0) <= score.get(prefer, 0.0) + margin:
        return prefer
    return best


def lru_victims(view: PolicyView, keep: Sequence[str]) -> tuple[str, ...]:
    """Resident drafts other than ``keep``, in the pool's least-recently-used order.

    The snapshot does not carry use times, so the view's acceptance window stands in: drafts
    that ran longest ago go first, never-run drafts before all of them.
    """
    last: dict[str, int] = {}
    for r in view.acceptance.window:
        if r.draft is not None:
            last[r.draft] = r.round_index
    for n, d in view.acceptance.per_draft.items():
        if n not in last and d.last_round is not None:
            last[n] = d.last_round
    cands = [n for n in view.resident if n not in keep]
    return tuple(sorted(cands, key=lambda n: last.get(n, -1)))


def stall_plan(view: PolicyView, selected: str | None, predictions: Mapping[str, float] | None = None
               ) -> SchedulePlan:
    """Plan of an on-demand policy: have ``selected`` in memory, evicting least recently used."""
    if selected is None or selected in view.unusable:
        return SchedulePlan(predictions=dict(predictions or {}))
    pending_other = tuple(p for p in view.pending_loads if p != selected)
    return SchedulePlan(want=(selected,), evictable=lru_victims(view, keep=(selected,)),
                        cancel=pending_other, predictions=dict(predictions or {}),
                        urgent=not view.is_resident(selected))


def stall_choice(view: PolicyView, selected: str | None, fallback_score: Mapping[str, float]) -> Decision:
    """Decision of an on-demand policy: run ``selected``, waiting for its load if needed.

    If ``selected`` cannot be loaded (marked unusable) the best resident draft runs instead.
    """
    if selected is not None and selected not in view.unusable:
        return Decision(selected, wait=not view.is_resident(selected))
    return Decision(best_of(view.resident, fallback_score, prefer=view.active))
