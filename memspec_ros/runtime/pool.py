"""The draft pool: the working set of drafts in memory, under a budget, shared by threads.

Three kinds of thread touch it: the decoding loop (uses the active draft for a round), the
background loader (moves drafts from storage into memory) and the scheduler (decides what to
prefetch and evict, from a timer in the ROS node). Every change goes through one lock, is
validated as a legal state transition, re-checks the budget invariant and is announced to
listeners, so a residency message can never describe a state the pool was not in.

Memory is reserved *before* a load reads its first byte (ON_STORAGE -> LOADING needs room),
so the bytes of resident, loading and evicting drafts never exceed the budget at any instant.
A draft evicted while the decoder is using it goes to EVICTING and is freed when that round
releases it: the decoder never has a model pulled out from under it.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .catalogue import Budget, Catalogue, DraftSpec
from .residency import OCCUPYING_STATES, DraftState, DraftStatus, ResidencyEvent, ResidencySnapshot

Listener = Callable[[ResidencyEvent], None]

_log = logging.getLogger(__name__)


class PoolError(RuntimeError):
    """Base class of pool errors."""


class InvalidTransition(PoolError):
    """A state change that the residency state machine does not allow."""


class BudgetExceeded(PoolError):
    """A load was asked to start without room for it (evict first)."""


class PoolInvariantError(PoolError):
    """The pool found itself in an impossible state. Always a bug; never silenced."""


@dataclass
class _Entry:
    spec: DraftSpec
    state: DraftState = DraftState.ON_STORAGE
    progress: float = 0.0
    predicted: float = 0.0
    handle: Any = None
    leases: int = 0
    last_used: int = 0
    last_error: str | None = None
    failures: int = 0
    status: DraftStatus | None = None
    """The last status built for this entry; reused while nothing it shows has changed."""

    def current_status(self, active: bool) -> DraftStatus:
        """This draft's status now, rebuilding it only if a field it shows has changed."""
        progress = 1.0 if self.state == DraftState.RESIDENT else self.progress
        s = self.status
        if (s is None or s.state != self.state or s.load_progress != progress or s.predicted_need != self.predicted
                or s.active != active or s.last_error != self.last_error):
            s = self.status = DraftStatus(name=self.spec.name, domain=self.spec.domain,
                                          size_bytes=self.spec.size_bytes, state=self.state, load_progress=progress,
                                          predicted_need=self.predicted, active=active, last_error=self.last_error)
        return s


class DraftPool:
    """Thread-safe residency state machine over a catalogue, under a budget.

    ``handle`` is whatever the loader materialised for a draft (a proposer that owns the draft
    model and its KV cache); the pool only stores and hands it out.
    """

    def __init__(self, catalogue: Catalogue, budget: Budget, clock: Callable[[], float] = time.monotonic) -> None:
        self.catalogue = catalogue
        self.budget = budget
        self._clock = clock
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._entries: dict[str, _Entry] = {s.name: _Entry(spec=s) for s in catalogue}
        self._active: str | None = None
        self._listeners: list[Listener] = []
        self._seq = itertools.count(1)
        self._use_counter = itertools.count(1)
        self._peak_bytes = 0
        self._budget_bytes = budget.capacity_bytes(catalogue)
        self._statuses: tuple[DraftStatus, ...] | None = None
        """Every draft's status as of the last change (rebuilt lazily after one: views read it every
        round, and rebuilding it for a catalogue of dozens of drafts was most of a round's bookkeeping)."""

    # ------------------------------------------------------------------ listeners
    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` on every residency change.

        Listeners run in the thread that made the change, with the pool's lock held, so events
        arrive in order. They must be quick (publish a message, set an event) and must not wait
        for another thread that uses the pool.
        """
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop notifying ``listener``."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # ------------------------------------------------------------------ queries
    def snapshot(self) -> ResidencySnapshot:
        """An immutable copy of the working set now."""
        with self._lock:
            return self._snapshot_locked(seq=0)

    def state(self, name: str) -> DraftState:
        """State of one draft."""
        with self._lock:
            return self._entry(name).state

    def spec(self, name: str) -> DraftSpec:
        """Catalogue entry of one draft."""
        return self._entry(name).spec

    @property
    def active(self) -> str | None:
        """The draft proposing tokens now (``None``: target-only or idle)."""
        with self._lock:
            return self._active

    def names_in(self, *states: DraftState) -> list[str]:
        """Drafts currently in any of ``states``, in catalogue order."""
        with self._lock:
            return [n for n, e in self._entries.items() if e.state in states]

    def resident(self) -> list[str]:
        """Drafts usable right now."""
        return self.names_in(DraftState.RESIDENT)

    def used_bytes(self) -> int:
        """Bytes of resident, loading and evicting drafts."""
        with self._lock:
            return self._used_locked()

    @property
    def budget_bytes(self) -> int:
        """The budget as bytes (see :meth:`Budget.capacity_bytes`)."""
        return self._budget_bytes

    @property
    def peak_bytes(self) -> int:
        """Highest ``used_bytes`` seen since construction."""
        with self._lock:
            return self._peak_bytes

    def can_admit(self, name: str, evicting: Iterable[str] = ()) -> bool:
        """Whether ``name`` could start loading now, if the drafts in ``evicting`` were gone."""
        with self._lock:
            gone = set(evicting) | {name}
            sizes = [e.spec.size_bytes for n, e in self._entries.items()
                     if e.state in OCCUPYING_STATES and n not in gone]
            return self.budget.admits([*sizes, self._entry(name).spec.size_bytes])

    def fits_alone(self, name: str) -> bool:
        """Whether ``name`` fits in the budget at all (with nothing else resident)."""
        return self.budget.admits([self._entry(name).spec.size_bytes])

    def lru_order(self, exclude: Iterable[str] = ()) -> list[str]:
        """Resident drafts, least recently used first, omitting ``exclude``."""
        excluded = set(exclude)
        with self._lock:
            res = [(e.last_used, n) for n, e in self._entries.items()
                   if e.state == DraftState.RESIDENT and n not in excluded]
        return [n for _, n in sorted(res)]

    def failed_drafts(self, min_failures: int) -> frozenset[str]:
        """Drafts whose loads failed at least ``min_failures`` times (one pass under one lock)."""
        with self._lock:
            return frozenset(n for n, e in self._entries.items() if e.failures >= min_failures)

    def failures(self, name: str) -> int:
        """How many loads of ``name`` have failed (not counting cancellations)."""
        with self._lock:
            return self._entry(name).failures

    def last_error(self, name: str) -> str | None:
        """Why the latest load of ``name`` failed, if it did."""
        with self._lock:
            return self._entry(name).last_error

    # ------------------------------------------------------------------ transitions
    def begin_load(self, name: str) -> None:
        """ON_STORAGE -> LOADING, reserving the draft's bytes. Raises if there is no room."""
        with self._lock:
            e = self._entry(name)
            if e.state != DraftState.ON_STORAGE:
                raise InvalidTransition(f"cannot load {name!r}: it is {e.state.name}")
            if not self.can_admit(name):
                raise BudgetExceeded(
                    f"no room to load {name!r} ({e.spec.size_bytes} B): {self._used_locked()} B of "
                    f"{self.budget.describe()} in use; evict first")
            e.progress = 0.0
            e.last_error = None
            self._move(e, DraftState.LOADING, "load started")

    def set_progress(self, name: str, fraction: float) -> None:
        """Record how much of a LOADING draft's weights has been read (0..1)."""
        with self._lock:
            e = self._entry(name)
            if e.state != DraftState.LOADING:
                return
            e.progress = max(0.0, min(1.0, float(fraction)))
            self._notify(e, e.state, e.state, "load progress")

    def complete_load(self, name: str, handle: Any) -> None:
        """LOADING -> RESIDENT with the materialised ``handle``."""
        with self._lock:
            e = self._entry(name)
            if e.state != DraftState.LOADING:
                raise InvalidTransition(f"cannot complete load of {name!r}: it is {e.state.name}")
            e.handle = handle
            e.progress = 1.0
            e.last_used = next(self._use_counter)
            self._move(e, DraftState.RESIDENT, "load completed")

    def abort_load(self, name: str, error: str | None = None) -> None:
        """LOADING -> ON_STORAGE: a load was cancelled (``error`` None) or failed (``error`` says why)."""
        with self._lock:
            e = self._entry(name)
            if e.state != DraftState.LOADING:
                raise InvalidTransition(f"cannot abort load of {name!r}: it is {e.state.name}")
            e.progress = 0.0
            e.handle = None
            if error is not None:
                e.failures += 1
                e.last_error = error
            self._move(e, DraftState.ON_STORAGE, f"load failed: {error}" if error else "load cancelled")

    def evict(self, name: str, reason: str = "evicted") -> bool:
        """RESIDENT -> EVICTING -> ON_STORAGE (the last step waits for the current user, if any).

        Returns False when ``name`` is not resident (nothing to do).
        """
        with self._lock:
            e = self._entry(name)
            if e.state != DraftState.RESIDENT:
                return False
            self._move(e, DraftState.EVICTING, reason)
            if e.leases == 0:
                self._free(e, reason)
            return True

    def acquire(self, name: str) -> Any:
        """Lease a RESIDENT draft's handle for one round; pair with :meth:`release`."""
        with self._lock:
            e = self._entry(name)
            if e.state != DraftState.RESIDENT:
                raise InvalidTransition(f"cannot use {name!r}: it is {e.state.name}")
            e.leases += 1
            e.last_used = next(self._use_counter)
            return e.handle

    def release(self, name: str) -> None:
        """End a lease; frees an EVICTING draft whose last user this was."""
        with self._lock:
            e = self._entry(name)
            if e.leases <= 0:
                raise InvalidTransition(f"release of {name!r} without a lease")
            e.leases -= 1
            if e.leases == 0 and e.state == DraftState.EVICTING:
                self._free(e, "evicted after use")
            else:
                self._check_invariant()

    def set_active(self, name: str | None) -> None:
        """Declare which draft proposes tokens now (``None``: target-only)."""
        with self._lock:
            if name == self._active:
                return
            if name is not None:
                e = self._entry(name)
                # A leased draft may already be EVICTING (a concurrent tick); it still runs this round.
                if not (e.state == DraftState.RESIDENT or (e.state == DraftState.EVICTING and e.leases)):
                    raise InvalidTransition(f"cannot activate {name!r}: it is {e.state.name}")
            self._active = name
            self._notify(self._entries.get(name) if name else None, None, None, "active draft changed")

    def set_predictions(self, predicted: Mapping[str, float]) -> None:
        """Store the predictor's need scores (0..1) so they are published with residency."""
        with self._lock:
            changed = False
            for n, v in predicted.items():
                e = self._entry(n)
                v = max(0.0, min(1.0, float(v)))
                if abs(e.predicted - v) > 1e-6:
                    e.predicted = v
                    changed = True
            if changed:
                self._notify(None, None, None, "predictions updated")

    def reset_failures(self, name: str | None = None) -> None:
        """Forget load failures (e.g. after a file was repaired)."""
        with self._lock:
            for e in ([self._entry(name)] if name else self._entries.values()):
                e.failures = 0
                e.last_error = None
            self._statuses = None

    # ------------------------------------------------------------------ waiting
    def wait_until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until ``predicate()`` (evaluated under the lock) holds; False on timeout."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def notify_waiters(self) -> None:
        """Wake threads in :meth:`wait_until` (for conditions outside the pool, e.g. a cancel)."""
        with self._changed:
            self._changed.notify_all()

    # ------------------------------------------------------------------ internals
    def _entry(self, name: str) -> _Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"unknown draft {name!r}; pool has {sorted(self._entries)}") from None

    def _used_locked(self) -> int:
        return sum(e.spec.size_bytes for e in self._entries.values() if e.state in OCCUPYING_STATES)

    def _free(self, e: _Entry, reason: str) -> None:
        e.handle = None
        e.progress = 0.0
        if self._active == e.spec.name:
            self._active = None
        self._move(e, DraftState.ON_STORAGE, reason)

    def _move(self, e: _Entry, new: DraftState, reason: str) -> None:
        old = e.state
        e.state = new
        self._check_invariant()
        self._peak_bytes = max(self._peak_bytes, self._used_locked())
        self._notify(e, old, new, reason)

    def _check_invariant(self) -> None:
        occupying = [e.spec.size_bytes for e in self._entries.values() if e.state in OCCUPYING_STATES]
        if not self.budget.admits(occupying):
            raise PoolInvariantError(f"budget exceeded: {sum(occupying)} B in {len(occupying)} drafts "
                                     f"> {self.budget.describe()}")
        for n, e in self._entries.items():
            has_weights = e.state in (DraftState.RESIDENT, DraftState.EVICTING)
            if e.leases and not has_weights:
                raise PoolInvariantError(f"{n} leased while {e.state.name}")
            if (e.handle is not None) != has_weights:
                raise PoolInvariantError(f"{n} handle presence inconsistent with {e.state.name}")
        if self._active is not None and self._entries[self._active].state not in (
                DraftState.RESIDENT, DraftState.EVICTING):
            raise PoolInvariantError(f"active draft {self._active} is {self._entries[self._active].state.name}")

    def _snapshot_locked(self, seq: int) -> ResidencySnapshot:
        if self._statuses is None:
            self._statuses = tuple(e.current_status(n == self._active) for n, e in self._entries.items())
        return ResidencySnapshot(seq=seq, time=self._clock(), budget_bytes=self._budget_bytes,
                                 used_bytes=self._used_locked(), active=self._active, drafts=self._statuses)

    def _notify(self, e: _Entry | None, old: DraftState | None, new: DraftState | None, reason: str) -> None:
        """Every change a snapshot shows ends here: drop the cached statuses, wake waiters, tell listeners."""
        self._statuses = None
        self._changed.notify_all()
        if not self._listeners:
            return
        event = ResidencyEvent(draft=e.spec.name if e else None, previous=old, current=new, reason=reason,
                               snapshot=self._snapshot_locked(next(self._seq)))
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken subscriber must not corrupt the state machine
                _log.exception("residency listener %r failed", listener)
