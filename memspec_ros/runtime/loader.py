"""The background loader: a worker thread that moves drafts from storage into the pool.

Why a thread of its own: the decoder must keep producing tokens while a draft is read, which
is the whole point of MemSpec. The worker really reads the safetensors bytes (paced to an
emulated bandwidth when asked), builds an empty model from the config and copies the weights
in, then hands the result to the pool. Every way a load can end - done, cancelled because
plans changed, timed out, failed on a corrupt or missing file - leaves the pool in a legal
state and is recorded, so the caller can report it (the ROS node puts failures in
diagnostics).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from memspec_ros.core.serial_thread import make_this_thread_serial

from .catalogue import DraftSpec
from .pool import DraftPool
from .residency import DraftState
from .storage import LoadCancelled, LoadTimedOut, StorageModel, read_files

_log = logging.getLogger(__name__)

Materializer = Callable[[DraftSpec, list[bytearray]], Any]
"""Turns a draft's raw safetensors blobs into the handle the pool stores (e.g. a proposer)."""


@dataclass
class LoadTicket:
    """A requested load. ``done`` is set when it ends, ``outcome`` says how."""

    name: str
    urgent: bool
    requested_at: float
    done: threading.Event = field(default_factory=threading.Event)
    outcome: str | None = None
    """``loaded``, ``cancelled``, ``failed``, ``timeout`` or ``already-resident``."""
    error: str | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the load ends; True if it did within ``timeout``."""
        return self.done.wait(timeout)

    @property
    def ok(self) -> bool:
        """True when the draft ended up resident."""
        return self.outcome in ("loaded", "already-resident")


@dataclass(frozen=True)
class LoadRecord:
    """One finished load attempt, for statistics and the load/round ratio."""

    name: str
    nbytes: int
    outcome: str
    queued_s: float
    read_s: float
    materialize_s: float
    error: str | None = None

    @property
    def load_s(self) -> float:
        """Storage-to-resident time (reading plus materialising), excluding queueing."""
        return self.read_s + self.materialize_s


RECENT_LOAD_RECORDS = 256
"""Finished loads the loader remembers one by one; older ones live on only in :class:`LoadTotals`."""


@dataclass(frozen=True)
class LoadTotals:
    """Running totals of every load attempt since the loader started (constant memory).

    A robot's node runs for weeks and loads drafts all along, so statistics come from
    aggregates updated per load, not from a list of every load ever made.
    """

    loaded: int = 0
    failed: int = 0
    """Attempts that ended ``failed`` or ``timeout``."""
    cancelled: int = 0
    load_s: float = 0.0
    """Sum of :attr:`LoadRecord.load_s` over the loads that succeeded."""

    @property
    def mean_load_s(self) -> float | None:
        """Mean storage-to-resident time of the successful loads (None before the first)."""
        return self.load_s / self.loaded if self.loaded else None

    def add(self, rec: LoadRecord) -> LoadTotals:
        """These totals with ``rec`` counted."""
        return LoadTotals(loaded=self.loaded + (rec.outcome == "loaded"),
                          failed=self.failed + (rec.outcome in ("failed", "timeout")),
                          cancelled=self.cancelled + (rec.outcome == "cancelled"),
                          load_s=self.load_s + (rec.load_s if rec.outcome == "loaded" else 0.0))


class Loader(Protocol):
    """What the scheduler needs from a loader (the real one or the simulator's)."""

    def request(self, name: str, urgent: bool = False) -> LoadTicket: ...

    def cancel(self, name: str) -> bool: ...

    def is_pending(self, name: str) -> bool: ...

    def pending(self) -> list[str]: ...

    def records(self) -> list[LoadRecord]: ...

    def totals(self) -> LoadTotals: ...


class BackgroundLoader:
    """Loads drafts on one worker thread (storage is one device; parallel reads would only
    share its bandwidth). Urgent requests - a policy that stalls for a draft - go first.
    """

    def __init__(
        self,
        pool: DraftPool,
        materialize: Materializer,
        storage: StorageModel | None = None,
        *,
        timeout_s: float | None = 30.0,
        space_wait_s: float = 5.0,
        on_failure: Callable[[LoadRecord], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pool = pool
        self.materialize = materialize
        self.storage = storage or StorageModel()
        self.timeout_s = timeout_s
        self.space_wait_s = space_wait_s
        self.on_failure = on_failure
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: list[LoadTicket] = []
        self._current: LoadTicket | None = None
        self._records: deque[LoadRecord] = deque(maxlen=RECENT_LOAD_RECORDS)
        self._totals = LoadTotals()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="memspec-draft-loader", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ API
    def request(self, name: str, urgent: bool = False) -> LoadTicket:
        """Queue a load of ``name`` (no-op if already queued, loading or resident).

        The caller must have made room (evicted) first; the worker waits up to
        ``space_wait_s`` for room held by drafts still EVICTING, then gives up.
        """
        self.pool.spec(name)  # unknown names fail here, in the caller's thread
        # Read the pool before taking our lock: the loader never holds its lock while waiting
        # for the pool's, so a pool listener may safely call back into the loader.
        resident = self.pool.state(name) == DraftState.RESIDENT
        with self._lock:
            if self._closed:
                raise RuntimeError("loader is closed")
            for t in [self._current, *self._queue]:
                if t is not None and t.name == name and not t.cancel_event.is_set():
                    if urgent and not t.urgent and t in self._queue:
                        t.urgent = True
                        self._queue.remove(t)
                        self._queue.insert(self._urgent_slot(), t)
                    return t
            ticket = LoadTicket(name=name, urgent=urgent, requested_at=self._clock())
            if resident:  # (the worker re-checks anyway, so a race here is harmless)
                ticket.outcome = "already-resident"
                ticket.done.set()
                return ticket
            if urgent:
                self._queue.insert(self._urgent_slot(), ticket)
            else:
                self._queue.append(ticket)
            self._wake.notify_all()
            return ticket

    def cancel(self, name: str) -> bool:
        """Abandon a queued or in-progress load of ``name``; True if there was one."""
        with self._lock:
            found = False
            for t in list(self._queue):
                if t.name == name:
                    self._queue.remove(t)
                    self._finish(t, "cancelled", None)
                    found = True
            if self._current is not None and self._current.name == name:
                self._current.cancel_event.set()
                found = True
        if found:
            self.pool.notify_waiters()
        return found

    def is_pending(self, name: str) -> bool:
        """Whether a load of ``name`` is queued or in progress."""
        with self._lock:
            return any(t is not None and t.name == name and not t.cancel_event.is_set()
                       for t in [self._current, *self._queue])

    def pending(self) -> list[str]:
        """Names queued or loading, in the order they will be served."""
        with self._lock:
            cur = [self._current.name] if self._current and not self._current.cancel_event.is_set() else []
            return cur + [t.name for t in self._queue]

    def records(self) -> list[LoadRecord]:
        """The most recent finished load attempts (at most :data:`RECENT_LOAD_RECORDS`), oldest first."""
        with self._lock:
            return list(self._records)

    def totals(self) -> LoadTotals:
        """Counts and times of every finished load attempt so far."""
        with self._lock:
            return self._totals

    def close(self, timeout: float = 5.0) -> None:
        """Cancel everything and stop the worker thread."""
        with self._lock:
            self._closed = True
            for t in self._queue:
                self._finish(t, "cancelled", None)
            self._queue.clear()
            if self._current is not None:
                self._current.cancel_event.set()
            self._wake.notify_all()
        self.pool.notify_waiters()
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        """Whether the worker thread is running."""
        return self._thread.is_alive()

    # ------------------------------------------------------------------ worker
    def _urgent_slot(self) -> int:
        return sum(1 for t in self._queue if t.urgent)

    def _run(self) -> None:
        make_this_thread_serial()  # a materialisation must not give this thread an OpenMP team (serial_thread.py)
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                ticket = self._queue.pop(0)
                self._current = ticket
            try:
                self._load(ticket)
            except Exception:  # never let the worker die: record and carry on
                _log.exception("unexpected error loading %s", ticket.name)
                self._finish_locked(ticket, "failed", "internal error (see log)")
            finally:
                with self._lock:
                    self._current = None
                    self._wake.notify_all()

    def _load(self, ticket: LoadTicket) -> None:
        name = ticket.name
        spec = self.pool.spec(name)
        # Room must exist before the first byte is read; drafts still EVICTING free theirs
        # (and a draft being evicted becomes loadable again) when their round ends.
        def ready() -> bool:  # runs under the pool's lock: check and reserve atomically
            st = self.pool.state(name)
            if ticket.cancel_event.is_set() or st == DraftState.RESIDENT:
                return True
            if st == DraftState.ON_STORAGE and self.pool.can_admit(name):
                self.pool.begin_load(name)
                return True
            return False

        ok = self.pool.wait_until(ready, self.space_wait_s)
        state = self.pool.state(name)
        if ticket.cancel_event.is_set() and state != DraftState.LOADING:
            self._finish_locked(ticket, "cancelled", None)
            return
        if state == DraftState.RESIDENT:
            self._finish_locked(ticket, "already-resident", None)
            return
        if not ok or state != DraftState.LOADING:
            err = (f"no room in the budget after {self.space_wait_s:.1f}s (evict first); "
                   f"draft is {state.name}")
            self._fail(ticket, spec, self._clock() - ticket.requested_at, 0.0, 0.0, err, outcome="failed")
            return
        t0 = self._clock()
        queued_s = t0 - ticket.requested_at
        deadline = None if self.timeout_s is None else t0 + self.timeout_s
        read_s = mat_s = 0.0
        try:
            files: Sequence[Path] = spec.weight_files
            blobs = read_files(
                files, self.storage,
                on_progress=lambda done, total: self.pool.set_progress(name, 0.95 * done / max(1, total)),
                wait=ticket.cancel_event.wait, deadline=deadline, clock=self._clock)
            read_s = self._clock() - t0
            t1 = self._clock()
            handle = self.materialize(spec, blobs)
            del blobs  # the file bytes are the load's transient: free them before it is recorded
            mat_s = self._clock() - t1
            if ticket.cancel_event.is_set():
                raise LoadCancelled()
            if deadline is not None and self._clock() > deadline:
                raise LoadTimedOut()
        except LoadCancelled:
            self.pool.abort_load(name, None)
            self._record(spec, "cancelled", queued_s, self._clock() - t0, 0.0, None)
            self._finish_locked(ticket, "cancelled", None)
            return
        except LoadTimedOut:
            err = f"load timed out after {self.timeout_s:.2f}s"
            self.pool.abort_load(name, err)
            self._fail(ticket, spec, queued_s, self._clock() - t0, 0.0, err, outcome="timeout")
            return
        except Exception as exc:  # corrupt/missing file, vocabulary mismatch, out of memory...
            err = f"{type(exc).__name__}: {exc}"
            self.pool.abort_load(name, err)
            self._fail(ticket, spec, queued_s, self._clock() - t0, 0.0, err, outcome="failed")
            return
        self.pool.complete_load(name, handle)
        self._record(spec, "loaded", queued_s, read_s, mat_s, None)
        self._finish_locked(ticket, "loaded", None)

    def _fail(self, ticket: LoadTicket, spec: DraftSpec, queued_s: float, read_s: float, mat_s: float,
              err: str, outcome: str) -> None:
        _log.warning("load of draft %s %s: %s", spec.name, outcome, err)
        rec = self._record(spec, outcome, queued_s, read_s, mat_s, err)
        self._finish_locked(ticket, outcome, err)
        if self.on_failure is not None:
            try:
                self.on_failure(rec)
            except Exception:
                _log.exception("load failure callback failed")

    def _record(self, spec: DraftSpec, outcome: str, queued_s: float, read_s: float, mat_s: float,
                err: str | None) -> LoadRecord:
        rec = LoadRecord(name=spec.name, nbytes=spec.stored_bytes, outcome=outcome, queued_s=queued_s,
                         read_s=read_s, materialize_s=mat_s, error=err)
        with self._lock:
            self._records.append(rec)
            self._totals = self._totals.add(rec)
        return rec

    def _finish_locked(self, ticket: LoadTicket, outcome: str, error: str | None) -> None:
        with self._lock:
            self._finish(ticket, outcome, error)

    @staticmethod
    def _finish(ticket: LoadTicket, outcome: str, error: str | None) -> None:
        if ticket.done.is_set():
            return
        ticket.outcome = outcome
        ticket.error = error
        ticket.done.set()
