"""The scheduler: the one place where plans become evictions, prefetches and cancellations.

Policies only *say* what working set they want (:class:`SchedulePlan`); this class carries it
out against the pool and a loader, the real background loader or the simulator's virtual one,
so MemSpec behaves identically in a real run and in simulation.

Two ways in, the same decisions:

* :meth:`Scheduler.tick` plans and applies at once; library users, benchmarks and the
  simulator call it inline every ``check_interval`` rounds.
* :meth:`Scheduler.plan` (prediction: forecast + wanted working set) and
  :meth:`Scheduler.apply_latest` (prefetch: loads, evictions, cancellations) separately; the ROS
  node runs them in two executor callbacks, so a load that finishes can start the next one by
  re-applying the latest plan without waiting for the next forecast.

Everything is thread-safe (one re-entrant lock), so the node's callbacks run beside the decoding
loop.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .loader import Loader, LoadTicket
from .policies.base import Policy, PolicyView, SchedulePlan
from .pool import DraftPool
from .residency import DraftState


@dataclass
class TickStats:
    """Cumulative cost of scheduling decisions (reports and the simulator's cost model)."""

    ticks: int = 0
    seconds: float = 0.0


class Scheduler:
    """Applies a policy's plans to a pool through a loader."""

    def __init__(self, pool: DraftPool, loader: Loader, policy: Policy, view: Callable[[], PolicyView],
                 clock: Callable[[], float] = time.perf_counter,
                 after_plan: Callable[[], None] | None = None) -> None:
        self.pool = pool
        self.loader = loader
        self.policy = policy
        self._view = view
        self._clock = clock
        self.lock = threading.RLock()
        """Held while a plan is made and applied (and while the policy is swapped)."""
        self.stats = TickStats()
        self._after_plan = after_plan
        """Runs inside the timed part of a tick: a virtual clock charges the tick's cost here."""
        self._latest: SchedulePlan | None = None
        self._failures_at_plan: dict[str, int] = {}

    def tick(self) -> SchedulePlan:
        """Ask the policy for a plan and carry it out; returns the plan."""
        with self.lock:
            t0 = self._clock()
            plan = self.policy.plan(self._view())
            self._remember(plan)
            self.apply(plan)
            if self._after_plan is not None:
                self._after_plan()
            self.stats.ticks += 1
            self.stats.seconds += self._clock() - t0
            return plan

    def plan(self) -> SchedulePlan:
        """Prediction only: ask the policy for a plan and keep it for :meth:`apply_latest`."""
        with self.lock:
            t0 = self._clock()
            plan = self.policy.plan(self._view())
            self._remember(plan)
            if self._after_plan is not None:
                self._after_plan()
            self.stats.ticks += 1
            self.stats.seconds += self._clock() - t0
            return plan

    def apply_latest(self) -> SchedulePlan | None:
        """Prefetch only: carry out the most recent plan again (None before the first plan).

        Re-applying is safe and cheap: drafts already resident, loading or queued are skipped,
        and the pool ignores a forecast it already has. What a stale plan must not do is retry a
        load that failed after the plan was made: the next forecast sees the draft's failure and
        decides; retrying here would loop (each failure triggers a re-apply).
        """
        with self.lock:
            plan = self._latest
            if plan is None:
                return None
            t0 = self._clock()
            failed_since = {n for n in plan.want if self.pool.failures(n) > self._failures_at_plan.get(n, 0)}
            if failed_since:
                plan = dataclasses.replace(plan, want=tuple(n for n in plan.want if n not in failed_since))
            self.apply(plan)
            self.stats.seconds += self._clock() - t0
            return plan

    def _remember(self, plan: SchedulePlan) -> None:
        self._latest = plan
        self._failures_at_plan = {n: self.pool.failures(n) for n in plan.want}

    def apply(self, plan: SchedulePlan) -> None:
        """Cancel, evict and request loads so the working set moves toward ``plan.want``.

        Only as much is evicted as the next wanted draft needs, victims taken in the plan's
        order; loads already queued count as occupying (they will reserve their bytes when
        they start), so queued loads never find the budget overcommitted. The plan's forecast
        goes to the pool first, so a residency message shows why a load is about to start.
        """
        if plan.predictions:
            self.pool.set_predictions(plan.predictions)
        for name in plan.cancel:
            self.loader.cancel(name)
        budget = self.pool.budget
        for i, name in enumerate(plan.want):
            state = self.pool.state(name)
            if state in (DraftState.RESIDENT, DraftState.LOADING) or self.loader.is_pending(name):
                continue
            if state == DraftState.EVICTING:
                continue  # being released by the running round; want it again next tick
            occupying = [n for n in self.pool.names_in(DraftState.RESIDENT, DraftState.LOADING,
                                                       DraftState.EVICTING)]
            pending = [n for n in self.loader.pending() if n not in occupying]
            victims: list[str] = []

            def fits(victims: list[str] = victims, occupying: list[str] = occupying,
                     pending: list[str] = pending, name: str = name) -> bool:
                names = [n for n in occupying if n not in victims] + pending + [name]
                return budget.admits(self.pool.spec(n).size_bytes for n in names)

            for v in plan.evictable:
                if fits():
                    break
                if v != name and self.pool.state(v) == DraftState.RESIDENT and v not in plan.want[:i]:
                    victims.append(v)
            if not fits():
                continue
            for v in victims:
                self.pool.evict(v, reason=f"evicted for {name}")
            self.loader.request(name, urgent=plan.urgent and i == 0)

    def demand(self, name: str) -> LoadTicket:
        """Load ``name`` now for a policy that will wait for it, evicting least recently used drafts.

        Loads of other drafts are abandoned: the decoder is blocked on this one.
        """
        with self.lock:
            for other in self.loader.pending():
                if other != name:
                    self.loader.cancel(other)
            lru = self.pool.lru_order(exclude=(name,))
            victims: list[str] = []
            for v in lru:
                if self.pool.can_admit(name, evicting=victims):
                    break
                victims.append(v)
            for v in victims:
                self.pool.evict(v, reason=f"evicted for {name} (on demand)")
            return self.loader.request(name, urgent=True)
