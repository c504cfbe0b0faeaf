"""The pool's state machine and its budget invariant, including under real concurrency."""

from __future__ import annotations

import random
import threading
import time

import pytest

from memspec_ros.runtime import (
    BackgroundLoader,
    Budget,
    BudgetExceeded,
    DraftPool,
    DraftState,
    InvalidTransition,
    StorageModel,
    make_materializer,
)
from memspec_ros.runtime.policies.base import SchedulePlan
from memspec_ros.runtime.scheduler import Scheduler


def test_transitions_and_invariant(world) -> None:
    pool = DraftPool(world.catalogue, Budget.drafts(1))
    a, b = world.catalogue.names[:2]
    pool.begin_load(a)
    with pytest.raises(BudgetExceeded):
        pool.begin_load(b)  # evict before a load starts
    with pytest.raises(InvalidTransition):
        pool.acquire(a)  # still loading
    pool.complete_load(a, object())
    handle = pool.acquire(a)
    assert handle is not None
    pool.set_active(a)
    assert pool.evict(a)
    assert pool.state(a) == DraftState.EVICTING  # in use: freed when the round ends
    with pytest.raises(BudgetExceeded):
        pool.begin_load(b)  # evicting memory is not free yet
    pool.release(a)
    assert pool.state(a) == DraftState.ON_STORAGE and pool.active is None
    pool.begin_load(b)
    pool.abort_load(b, "disk on fire")
    assert pool.state(b) == DraftState.ON_STORAGE and pool.failures(b) == 1 and "fire" in pool.last_error(b)


def test_listeners_see_every_change_in_order(world) -> None:
    pool = DraftPool(world.catalogue, Budget.drafts(2))
    events = []
    pool.add_listener(events.append)
    n = world.catalogue.names[0]
    pool.begin_load(n)
    pool.set_progress(n, 0.5)
    pool.complete_load(n, object())
    pool.set_active(n)
    pool.set_predictions({n: 0.7})
    pool.evict(n)
    states = [(e.draft, e.previous, e.current) for e in events if e.previous != e.current]
    assert states == [(n, DraftState.ON_STORAGE, DraftState.LOADING), (n, DraftState.LOADING, DraftState.RESIDENT),
                      (n, DraftState.RESIDENT, DraftState.EVICTING), (n, DraftState.EVICTING, DraftState.ON_STORAGE)]
    seqs = [e.snapshot.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert any(e.snapshot.status(n).predicted_need == pytest.approx(0.7) for e in events)
    assert any(e.snapshot.status(n).load_progress == pytest.approx(0.5) for e in events)


@pytest.mark.parametrize("budget", [Budget.drafts(2), "bytes"])
def test_budget_invariant_under_concurrent_prefetch_and_eviction(world, budget) -> None:
    """Threads prefetch, evict, use and cancel at random while a real loader works."""
    cat = world.catalogue
    if budget == "bytes":
        sizes = sorted(s.size_bytes for s in cat)
        budget = Budget.bytes(sizes[-1] + sizes[0] + sizes[1])
    pool = DraftPool(cat, budget)
    violations: list[str] = []

    def check(event) -> None:
        snap = event.snapshot
        occupying = [d for d in snap.drafts if d.state != DraftState.ON_STORAGE]
        if not budget.admits(d.size_bytes for d in occupying):
            violations.append(f"{[d.name for d in occupying]} exceed {budget.describe()}")
        if snap.used_bytes != sum(d.size_bytes for d in occupying):
            violations.append("used_bytes inconsistent")

    pool.add_listener(check)
    loader = BackgroundLoader(pool, make_materializer(cat), StorageModel.mb_per_s(40), space_wait_s=0.05)
    plans = [SchedulePlan(want=tuple(random.Random(i).sample(cat.names, 3)),
                          evictable=tuple(random.Random(i + 100).sample(cat.names, len(cat.names))),
                          cancel=tuple(random.Random(i + 200).sample(cat.names, 1))) for i in range(40)]
    sched = Scheduler(pool, loader, policy=None, view=lambda: None)  # type: ignore[arg-type]
    stop = threading.Event()
    errors: list[BaseException] = []

    def planner(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                sched.apply(rng.choice(plans))
                time.sleep(rng.uniform(0, 0.01))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def decoder(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                res = pool.resident()
                if res:
                    name = rng.choice(res)
                    try:
                        pool.acquire(name)
                    except InvalidTransition:
                        continue
                    time.sleep(rng.uniform(0, 0.004))  # a "round"
                    pool.release(name)
                if rng.random() < 0.2 and res:
                    pool.evict(rng.choice(res))
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=planner, args=(i,)) for i in range(2)] + \
              [threading.Thread(target=decoder, args=(10 + i,)) for i in range(2)]
    for t in threads:
        t.start()
    # Churn for at least 1.5 s and until real loads have completed: a fixed duration alone
    # let a busy machine end the churn before any load finished.
    start = time.monotonic()
    while time.monotonic() - start < 1.5 or (
        sum(r.outcome == "loaded" for r in loader.records()) < 3 and time.monotonic() - start < 120
    ):
        time.sleep(0.05)  # the threads above do the work
    stop.set()
    for t in threads:
        t.join(5)
    loader.close()
    assert not errors, errors
    assert not violations, violations[:5]
    assert pool.peak_bytes <= pool.budget_bytes
    outcomes = {r.outcome for r in loader.records()}
    assert "loaded" in outcomes, outcomes  # real loads happened
    assert not loader.alive
