"""Scheduler.apply on a real pool and the virtual loader (milliseconds; no models)."""

from __future__ import annotations

import pytest

from memspec_ros.runtime.policies import make_policy
from memspec_ros.runtime.policies.base import SchedulePlan
from memspec_ros.runtime.residency import DraftState
from memspec_ros.runtime.scheduler import Scheduler

from .hand_built import Stage

GENERAL, CODE, LEGAL = "draft-general", "draft-code", "draft-legal"


def _scheduler(stage: Stage) -> Scheduler:
    policy = make_policy("static")
    policy.bind(stage.catalogue, stage.budget, 4)
    return Scheduler(stage.pool, stage.loader, policy, stage.view, clock=stage.clock)


def test_the_plans_forecast_reaches_the_pool_before_any_load() -> None:
    stage = Stage()
    seen: list[tuple[float, DraftState]] = []
    stage.pool.add_listener(lambda ev: seen.append((ev.snapshot.status(LEGAL).predicted_need,
                                                    ev.snapshot.state(LEGAL))))
    _scheduler(stage).apply(SchedulePlan(want=(LEGAL,), predictions={GENERAL: 0.2, CODE: 0.0, LEGAL: 0.9}))
    snap = stage.pool.snapshot()
    assert snap.status(LEGAL).predicted_need == pytest.approx(0.9)
    assert snap.status(GENERAL).predicted_need == pytest.approx(0.2)
    assert seen[0] == (pytest.approx(0.9), DraftState.ON_STORAGE), "forecast first, then the load it explains"
    assert stage.pool.state(LEGAL) == DraftState.LOADING


def test_a_plan_without_forecast_keeps_the_last_one() -> None:
    stage = Stage()
    sched = _scheduler(stage)
    sched.apply(SchedulePlan(predictions={CODE: 0.7}))
    sched.apply(SchedulePlan())
    assert stage.pool.snapshot().status(CODE).predicted_need == pytest.approx(0.7)


def test_evicts_only_what_the_wanted_draft_needs_in_the_plans_order() -> None:
    stage = Stage(budget_drafts=2)
    stage.load(GENERAL, CODE)
    _scheduler(stage).apply(SchedulePlan(want=(LEGAL,), evictable=(CODE, GENERAL)))
    assert stage.pool.state(CODE) == DraftState.ON_STORAGE
    assert stage.pool.state(GENERAL) == DraftState.RESIDENT
    assert stage.pool.state(LEGAL) == DraftState.LOADING


def test_nothing_moves_when_no_room_may_be_made() -> None:
    stage = Stage(budget_drafts=2)
    stage.load(GENERAL, CODE)
    _scheduler(stage).apply(SchedulePlan(want=(LEGAL,), evictable=()))
    assert stage.pool.resident() == [GENERAL, CODE]
    assert stage.loader.pending() == []


def test_a_draft_wanted_earlier_in_the_plan_is_never_evicted_for_a_later_one() -> None:
    stage = Stage(budget_drafts=2)
    stage.load(GENERAL, CODE)
    _scheduler(stage).apply(SchedulePlan(want=(CODE, LEGAL), evictable=(CODE,)))
    assert stage.pool.state(CODE) == DraftState.RESIDENT
    assert stage.pool.state(LEGAL) == DraftState.ON_STORAGE


def test_queued_and_running_loads_count_as_occupying() -> None:
    stage = Stage(budget_drafts=2)
    stage.load(GENERAL)
    stage.loader.request(CODE)  # starts at once on the virtual loader: LOADING
    assert stage.pool.state(CODE) == DraftState.LOADING
    _scheduler(stage).apply(SchedulePlan(want=(LEGAL,)))
    assert stage.pool.state(LEGAL) == DraftState.ON_STORAGE and not stage.loader.is_pending(LEGAL)


def test_cancels_loads_the_plan_abandons() -> None:
    stage = Stage(budget_drafts=2)
    stage.loader.request(LEGAL)
    sched = _scheduler(stage)
    sched.apply(SchedulePlan(cancel=(LEGAL,)))
    assert stage.pool.state(LEGAL) == DraftState.ON_STORAGE
    assert stage.loader.pending() == []
    assert [r.outcome for r in stage.loader.records()] == ["cancelled"]


def test_an_evicting_draft_is_not_reloaded_in_the_same_tick() -> None:
    stage = Stage(budget_drafts=2)
    stage.load(GENERAL)
    stage.pool.acquire(GENERAL)  # a round is using it
    stage.pool.evict(GENERAL)
    assert stage.pool.state(GENERAL) == DraftState.EVICTING
    _scheduler(stage).apply(SchedulePlan(want=(GENERAL,)))
    assert not stage.loader.is_pending(GENERAL)
    stage.pool.release(GENERAL)
    assert stage.pool.state(GENERAL) == DraftState.ON_STORAGE


def test_urgent_plans_jump_the_load_queue() -> None:
    stage = Stage(budget_drafts=None)
    stage.loader.request(GENERAL)  # running
    stage.loader.request(CODE)  # queued behind it
    _scheduler(stage).apply(SchedulePlan(want=(LEGAL,), urgent=True))
    assert stage.loader.pending() == [GENERAL, LEGAL, CODE]


class _FixedPlan:
    """A policy whose every plan is ``plan`` (the scheduler only asks policies for plans)."""

    def __init__(self, plan: SchedulePlan) -> None:
        self._plan = plan

    def plan(self, view) -> SchedulePlan:
        return self._plan


def test_reapplying_the_latest_plan_never_retries_a_failed_load() -> None:
    """The node's prefetch callback re-applies the latest plan whenever a load ends."""
    stage = Stage(budget_drafts=1)
    stage.loader.fail = {LEGAL}
    forecasts: list[float] = []
    stage.pool.add_listener(lambda ev: ev.reason == "predictions updated" and forecasts.append(
        ev.snapshot.status(LEGAL).predicted_need))
    sched = Scheduler(stage.pool, stage.loader, _FixedPlan(SchedulePlan(want=(LEGAL, CODE),
                                                                        predictions={LEGAL: 0.9})),
                      stage.view, clock=stage.clock)
    assert sched.apply_latest() is None
    sched.plan()
    assert stage.loader.pending() == [] and stage.pool.state(LEGAL) == DraftState.ON_STORAGE, "plan only plans"
    sched.apply_latest()
    assert stage.loader.pending() == [LEGAL], "CODE does not fit beside LEGAL yet"
    stage.loader.advance(stage.clock.now + 5.0)
    assert stage.pool.failures(LEGAL) == 1 and stage.pool.state(LEGAL) == DraftState.ON_STORAGE
    applied = sched.apply_latest()  # what a finished (here: failed) load triggers
    assert applied.want == (CODE,), "the failed draft waits for the next forecast"
    assert stage.loader.pending() == [CODE]
    sched.apply_latest()
    assert stage.loader.pending() == [CODE] and stage.pool.failures(LEGAL) == 1
    assert forecasts == [pytest.approx(0.9)], "re-applying does not publish the forecast again"
