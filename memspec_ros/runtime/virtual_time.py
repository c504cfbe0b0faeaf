"""Virtual time: a clock that moves only when told, and a loader that follows it.

The simulator replaces the wall clock and the background loader thread with these, so a run
has no threads and no wall-clock reads: same inputs, same timeline, to the bit. The loader
keeps the real loader's contract (one load at a time, urgent ones first, cancellable) and
completes loads when virtual time reaches their modelled end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .loader import RECENT_LOAD_RECORDS, LoadRecord, LoadTicket, LoadTotals
from .pool import DraftPool
from .residency import DraftState


class VirtualClock:
    """A clock that only moves when told to; what runs in the background follows it."""

    def __init__(self) -> None:
        self.now = 0.0
        self._followers: list[Callable[[float], None]] = []

    def __call__(self) -> float:
        return self.now

    def follow(self, catch_up: Callable[[float], None]) -> None:
        """Call ``catch_up(now)`` whenever the clock advances (a virtual loader's progress)."""
        self._followers.append(catch_up)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass."""
        self.now += seconds
        for catch_up in self._followers:
            catch_up(self.now)


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
        # A rolling window, as the real loader keeps: one simulator may replay sessions for
        # 10^6 rounds (the runtime soak); counts and times over all loads live in the totals.
        self._records: deque[LoadRecord] = deque(maxlen=RECENT_LOAD_RECORDS)
        self._totals = LoadTotals()
        clock.follow(self.advance)

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
            self._record(LoadRecord(name, self.pool.spec(name).stored_bytes, "cancelled",
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
        """The most recent finished load attempts (at most :data:`RECENT_LOAD_RECORDS`), oldest first."""
        return list(self._records)

    def totals(self) -> LoadTotals:
        """Counts and times of every finished load attempt, as the real loader reports them."""
        return self._totals

    def _record(self, rec: LoadRecord) -> None:
        self._records.append(rec)
        self._totals = self._totals.add(rec)

    def close(self) -> None:
        """Nothing to stop: there is no thread."""

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
                self._record(LoadRecord(name, self.pool.spec(name).stored_bytes, outcome,
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
                self._record(LoadRecord(head.name, self.pool.spec(head.name).stored_bytes, "failed",
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
