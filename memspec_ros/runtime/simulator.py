"""Trace-driven simulation: the same policy code, a virtual clock, exact greedy tokens.

The simulator replays a session's exact acceptance trace (:mod:`~memspec_ros.runtime.traces`)
through the *same* :class:`DraftPool`, :class:`Scheduler`, acceptance tracker, context tracker
and policy objects as the real runtime, in the same order as :meth:`DraftRuntime.generate`
calls them. Only two things are substituted: the engine (tokens come from the trace, costs from
a :class:`~memspec_ros.runtime.cost_model.CostModel`) and the loader (a
:class:`VirtualLoader` that completes loads on the virtual clock). There are no threads and
no wall-clock reads, so a run is deterministic: same inputs, same timeline, to the bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .acceptance import AcceptanceTracker, RoundRecord
from .catalogue import Budget, Catalogue
from .context import ContextTracker
from .cost_model import CostModel
from .loader import LoadRecord, LoadTicket
from .policies.base import Policy, PolicyView, RoundFeedback
from .pool import DraftPool
from .residency import DraftState
from .runtime import GenerationReport, RoundEvent, RuntimeConfig
from .scheduler import Scheduler
from .traces import SessionTrace


class VirtualClock:
    """A clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class _Active:
    ticket: LoadTicket
    start: float
    end: float


class VirtualLoader:
    """The loader's contract on a virtual clock: one load at a time, urgent ones first."""

    def __init__(self, pool: DraftPool, clock: VirtualClock, load_s: dict[str, float],
                 space_wait_s: float = 5.0, fail: Sequence[str] = ()) -> None:
        self.pool = pool
        self.clock = clock
        self.load_s = load_s
        self.space_wait_s = space_wait_s
        self.fail = set(fail)
        self._queue: list[LoadTicket] = []
        self._current: _Active | None = None
        self._free_at = 0.0
        self._records: list[LoadRecord] = []

    # ---- Loader protocol
    def request(self, name: str, urgent: bool = False) -> LoadTicket:
        """Queue a load (idempotent, like the real loader)."""
        for t in ([self._current.ticket] if self._current else []) + self._queue:
            if t.name == name:
                if urgent and t in self._queue and not t.urgent:
                    t.urgent = True
                    self._queue.remove(t)
                    self._queue.insert(sum(1 for q in self._queue if q.urgent), t)
                return t
        ticket = LoadTicket(name=name, urgent=urgent, requested_at=self.clock.now)
        if self.pool.state(name) == DraftState.RESIDENT:
            ticket.outcome = "already-resident"
            ticket.done.set()
            return ticket
        if urgent:
            self._queue.insert(sum(1 for q in self._queue if q.urgent), ticket)
        else:
            self._queue.append(ticket)
        self.advance(self.clock.now)
        return ticket

    def cancel(self, name: str) -> bool:
        """Abandon a queued or running load of ``name``."""
        found = False
        for t in list(self._queue):
            if t.name == name:
                self._queue.remove(t)
                t.outcome = "cancelled"
                t.done.set()
                found = True
        if self._current is not None and self._current.ticket.name == name:
            cur = self._current
            self._current = None
            self.pool.abort_load(name, None)
            self._records.append(LoadRecord(name, self.pool.spec(name).size_bytes, "cancelled",
                                            cur.start - cur.ticket.requested_at, self.clock.now - cur.start, 0.0))
            cur.ticket.outcome = "cancelled"
            cur.ticket.done.set()
            self._free_at = self.clock.now
            found = True
        return found

    def is_pending(self, name: str) -> bool:
        """Queued or loading."""
        return any(t.name == name for t in self._tickets())

    def pending(self) -> list[str]:
        """Names queued or loading, in service order."""
        return [t.name for t in self._tickets()]

    def records(self) -> list[LoadRecord]:
        """Finished load attempts."""
        return list(self._records)

    # ---- virtual time
    def _tickets(self) -> list[LoadTicket]:
        return ([self._current.ticket] if self._current else []) + list(self._queue)

    def next_event(self) -> float | None:
        """Virtual time of the next completion, if a load is running."""
        return self._current.end if self._current else None

    def advance(self, until: float) -> None:
        """Process starts and completions up to virtual time ``until``."""
        now = self.clock.now
        while True:
            if self._current is not None:
                if self._current.end > until:
                    break
                cur = self._current
                self._current = None
                self.clock.now = cur.end
                name = cur.ticket.name
                if name in self.fail:
                    self.pool.abort_load(name, "injected failure")
                    outcome = "failed"
                else:
                    self.pool.complete_load(name, object())
                    outcome = "loaded"
                self._records.append(LoadRecord(name, self.pool.spec(name).size_bytes, outcome,
                                                cur.start - cur.ticket.requested_at, cur.end - cur.start, 0.0,
                                                "injected failure" if outcome == "failed" else None))
                cur.ticket.outcome = outcome
                cur.ticket.error = "injected failure" if outcome == "failed" else None
                cur.ticket.done.set()
                self._free_at = cur.end
                continue
            if not self._queue:
                break
            head = self._queue[0]
            start = max(self._free_at, head.requested_at)
            if start > until:
                break
            self.clock.now = max(start, self.clock.now)
            self._queue.pop(0)
            state = self.pool.state(head.name)
            if state == DraftState.RESIDENT:
                head.outcome = "already-resident"
                head.done.set()
                continue
            if state != DraftState.ON_STORAGE or not self.pool.can_admit(head.name):
                # The real loader would wait space_wait_s for room; nothing frees room inside
                # a virtual interval without a tick, so the outcome is the same: failure.
                head.outcome = "failed"
                head.error = "no room in the budget"
                head.done.set()
                self._records.append(LoadRecord(head.name, self.pool.spec(head.name).size_bytes, "failed",
                                                0.0, 0.0, 0.0, head.error))
                continue
            self.pool.begin_load(head.name)
            self._current = _Active(head, self.clock.now, self.clock.now + self.load_s[head.name])
        self.clock.now = max(now, until)

    def run_until_done(self, ticket: LoadTicket) -> None:
        """Advance virtual time until ``ticket`` finishes (a stall)."""
        guard = 0
        while not ticket.done.is_set():
            nxt = self.next_event()
            if nxt is None:
                self.advance(self.clock.now)
                if not ticket.done.is_set() and self.next_event() is None:
                    ticket.outcome = ticket.outcome or "failed"
                    ticket.done.set()
                    break
                continue
            self.advance(nxt)
            self.clock.now = max(self.clock.now, nxt)
            guard += 1
            if guard > 10_000:
                raise RuntimeError("virtual loader did not converge")


@dataclass
class SimulationResult:
    """Per-turn reports (same type as real runs) and totals."""

    reports: list[GenerationReport] = field(default_factory=list)
    load_records: list[LoadRecord] = field(default_factory=list)
    predictor_calls: int = 0

    @property
    def tokens(self) -> int:
        """Tokens over the session."""
        return sum(r.tokens for r in self.reports)

    @property
    def wall_s(self) -> float:
        """Virtual seconds over the session."""
        return sum(r.wall_s for r in self.reports)

    @property
    def tokens_per_s(self) -> float:
        """Session tokens per virtual second."""
        return self.tokens / self.wall_s if self.wall_s else 0.0

    @property
    def stall_s(self) -> float:
        """Virtual seconds spent waiting for loads."""
        return sum(r.stall_s for r in self.reports)


class Simulator:
    """Runs one policy over session traces on a virtual clock."""

    def __init__(self, catalogue: Catalogue, budget: Budget, policy: Policy, cost: CostModel,
                 config: RuntimeConfig | None = None, *, fail_loads: Sequence[str] = ()) -> None:
        self.catalogue = catalogue
        self.config = config or RuntimeConfig()
        self.budget = Budget.unlimited() if policy.unlimited_memory else budget
        self.policy = policy
        self.cost = cost
        self.clock = VirtualClock()
        policy.bind(catalogue, self.budget, self.config.k)
        self.pool = DraftPool(catalogue, self.budget, clock=self.clock)
        self.loader = VirtualLoader(self.pool, self.clock, dict(cost.load_s), self.config.space_wait_s, fail_loads)
        self.tracker = AcceptanceTracker(catalogue.names)
        self.context = ContextTracker()
        self.scheduler = Scheduler(self.pool, self.loader, policy, self._view, clock=self.clock)
        self.pool.add_listener(self._on_residency)
        self._round = 0
        self._turn = 0
        self._pos = 0
        self._remaining = 0
        self._hint: str | None = None
        self._synced: dict[str, int] = {}

    def _on_residency(self, event) -> None:
        # A freshly loaded draft is a new proposer with an empty KV cache.
        if event.current == DraftState.RESIDENT and event.previous == DraftState.LOADING:
            self._synced[event.draft] = 0

    def set_hint(self, domain: str | None) -> None:
        """Same as :meth:`DraftRuntime.set_hint`."""
        self._hint = domain

    def warm_up(self, drafts: Sequence[str] | None = None) -> list[str]:
        """Load the initial working set instantly (the real runtime does it before timing)."""
        names = list(drafts) if drafts is not None else self.policy.initial_working_set()
        for n in names:
            if self.pool.state(n) == DraftState.ON_STORAGE and self.pool.can_admit(n):
                self.pool.begin_load(n)
                self.pool.complete_load(n, object())
        return self.pool.resident()

    def _view(self) -> PolicyView:
        unusable = frozenset(n for n in self.catalogue.names
                             if self.pool.failures(n) >= self.config.max_load_failures)
        return PolicyView(now=self.clock.now, round_index=self._round, turn=self._turn, turn_position=self._pos,
                          remaining=self._remaining, k=self.config.k, residency=self.pool.snapshot(),
                          pending_loads=tuple(self.loader.pending()), acceptance=self.tracker.summary(),
                          context=self.context.features(), hint=self._hint, unusable=unusable,
                          catalogue=self.catalogue, budget=self.budget)

    def _tick(self) -> None:
        calls0 = self._predictor_calls()
        self.scheduler.tick()
        self.clock.now += self.cost.tick_s + (self._predictor_calls() - calls0) * self.cost.predictor_s
        self.loader.advance(self.clock.now)

    def _predictor_calls(self) -> int:
        pred = getattr(self.policy, "predictor", None)
        return int(getattr(pred, "calls", 0)) if pred is not None else 0

    def run(self, trace: SessionTrace) -> SimulationResult:
        """Simulate one session (all its turns, one conversation)."""
        result = SimulationResult()
        self._synced = {}
        context_len = 0
        calls0 = self._predictor_calls()
        k = self.config.k
        for ti, turn in enumerate(trace.turns):
            t_start = self.clock.now
            prefilled = len(turn.prompt_ids) - (1 if ti == 0 else 0)
            self.clock.now += self.cost.prefill(prefilled) + self.cost.turn_overhead_s
            self.loader.advance(self.clock.now)
            context_len += len(turn.prompt_ids)
            self.context.new_turn(turn.prompt_ids)
            self._turn, self._pos = ti, 0
            self._remaining = turn.max_new_tokens
            self.policy.new_turn(self._view())
            rep = GenerationReport(output_ids=list(turn.output_ids), text="", finish_reason=turn.finish_reason,
                                   wall_s=0.0, prompt_tokens=len(turn.prompt_ids) - (1 if ti == 0 else 0))
            turn_rounds = since_tick = 0
            tick_s0 = 0.0
            while self._pos < len(turn.output_ids):
                r_start = self.clock.now
                self.loader.advance(self.clock.now)
                view = self._view()
                chosen, stall = self._select(view)
                if chosen is not None:
                    self.pool.acquire(chosen)
                self.pool.set_active(chosen)
                p, a, e = turn.round_at(chosen, self._pos, k)
                draft = chosen if p > 0 else None  # the engine reports no draft for an empty proposal
                draft_s = 0.0
                if draft is not None:
                    synced = min(self._synced.get(draft, 0), context_len - 1)
                    draft_s = self.cost.propose_at(draft, p, context_len - synced, context_len)
                    self._synced[draft] = context_len + min(a, p - 1)
                if chosen is not None:
                    self.pool.release(chosen)
                verify_s = self.cost.verify(p, context_len)
                extra_s = 0.0
                cf = None
                if self.policy.wants_counterfactual and p > 0:
                    cf = {}
                    for other in self.pool.resident():
                        if other == draft:
                            continue
                        n = min(turn.run_length(other, self._pos, p), e)
                        syn = min(self._synced.get(other, 0), context_len - 1)
                        extra_s += self.cost.propose_at(other, p, context_len - syn, context_len)
                        self._synced[other] = context_len + min(n, p - 1)
                        cf[other] = n
                seconds = draft_s + verify_s + extra_s + self.cost.round_overhead_s
                self.clock.now += seconds
                emitted = turn.output_ids[self._pos: self._pos + e]
                hidden = turn.hidden[self._pos: self._pos + e].astype(np.float32) if turn.hidden is not None else None
                self.context.push(emitted, hidden)
                r_end = self.clock.now
                self.tracker.record(RoundRecord(round_index=view.round_index, draft=draft, proposed=p, accepted=a,
                                                emitted=e, seconds=r_end - r_start, draft_s=draft_s,
                                                verify_s=verify_s))
                self._round += 1
                self._pos += e
                context_len += e
                self._remaining = turn.max_new_tokens - self._pos
                self.policy.observe(RoundFeedback(round_index=view.round_index, turn=ti,
                                                  turn_position=view.turn_position, draft=draft, proposed=p,
                                                  accepted=a, emitted=e, seconds=r_end - r_start,
                                                  counterfactual=cf), view)
                rep.record_round(draft, p, a, stall)
                self.loader.advance(self.clock.now)
                snap = self.pool.snapshot()
                rep.timeline.append(RoundEvent(start=r_start - t_start, end=r_end - t_start, turn=ti, draft=draft,
                                               proposed=p, accepted=a, emitted=e, stall_s=stall, draft_s=draft_s,
                                               verify_s=verify_s, extra_s=extra_s, catchup_tokens=0,
                                               resident=tuple(snap.resident),
                                               loading=tuple(snap.names_in(DraftState.LOADING))))
                turn_rounds += 1
                since_tick += 1
                if turn_rounds == 1 or since_tick >= self.config.check_interval:
                    since_tick = 0
                    t0 = self.clock.now
                    self._tick()
                    tick_s0 += self.clock.now - t0
            self.pool.set_active(None)
            rep.tick_s = tick_s0
            rep.wall_s = self.clock.now - t_start
            result.reports.append(rep)
        result.load_records = self.loader.records()
        result.predictor_calls = self._predictor_calls() - calls0
        return result

    def _select(self, view: PolicyView) -> tuple[str | None, float]:
        """Mirror of :meth:`DraftRuntime._select_draft` on the virtual clock."""
        decision = self.policy.choose(view)
        draft = decision.draft
        if draft is None or self.pool.state(draft) == DraftState.RESIDENT:
            return draft, 0.0
        stall = 0.0
        if decision.wait:
            t0 = self.clock.now
            ticket = self.scheduler.demand(draft)
            self.loader.run_until_done(ticket)
            stall = self.clock.now - t0
            if self.pool.state(draft) == DraftState.RESIDENT:
                return draft, stall
            decision = self.policy.choose(self._view())
            if decision.draft is not None and self.pool.state(decision.draft) == DraftState.RESIDENT:
                return decision.draft, stall
        return None, stall
