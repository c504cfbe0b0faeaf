"""Every policy's decisions on hand-built views (milliseconds; no models).

The slow suites run policies end to end; these pin down what each one *decides* from a given
view, so a one-line policy change is caught here in well under a second.
"""

from __future__ import annotations

import numpy as np
import pytest

from memspec_ros.runtime.load_value import net_of_load
from memspec_ros.runtime.policies import make_policy, policy_class
from memspec_ros.runtime.policies.base import Decision, Policy, RoundFeedback
from memspec_ros.runtime.traces import DialogueTrace, TurnTrace

from .hand_built import Stage, constant_predictor

GENERAL, CODE, LEGAL = "draft-general", "draft-code", "draft-legal"


def _bound(stage: Stage, name: str, **kwargs):
    policy = make_policy(name, **kwargs)
    policy.bind(stage.catalogue, stage.budget, 4)
    return policy


def _feedback(stage: Stage, draft: str | None, proposed: int = 4, accepted: int = 0,
              counterfactual: dict[str, int] | None = None) -> RoundFeedback:
    return RoundFeedback(round_index=stage.round_index, turn=0, turn_position=0, draft=draft, proposed=proposed,
                         accepted=accepted, emitted=accepted + 1, seconds=0.03, counterfactual=counterfactual)


def _forecast_stage(forecast: dict[str, float]):
    stage = Stage(budget_drafts=2)
    return stage, constant_predictor(forecast, stage.names)


# ---------------------------------------------------------------- static
def test_static_runs_the_generalist_and_waits_for_it() -> None:
    stage = Stage()
    policy = _bound(stage, "static")
    assert policy.initial_working_set() == [GENERAL]
    assert policy.choose(stage.view()) == Decision(GENERAL, wait=True)
    plan = policy.plan(stage.view())
    assert plan.want == (GENERAL,) and plan.urgent
    stage.load(GENERAL)
    assert policy.choose(stage.view()) == Decision(GENERAL, wait=False)
    assert not policy.plan(stage.view()).urgent


def test_static_serves_target_only_when_its_draft_cannot_load() -> None:
    stage = Stage()
    policy = _bound(stage, "static")
    stage.unusable = frozenset({GENERAL})
    assert policy.choose(stage.view()) == Decision(None)
    assert policy.plan(stage.view()).want == ()


# ---------------------------------------------------------------- reactive
def _reactive_on_general(accepted: int) -> tuple[Stage, Policy]:
    """Reactive with only the general draft resident, after four rounds accepting ``accepted``."""
    stage = Stage()
    stage.load(GENERAL)
    policy = _bound(stage, "reactive")
    for _ in range(4):
        stage.run(GENERAL, accepted=accepted)
    return stage, policy


def test_reactive_replaces_a_collapsing_draft_and_waits_for_the_new_one() -> None:
    stage = Stage()
    stage.load(GENERAL)
    policy = _bound(stage, "reactive")
    assert policy.choose(stage.view()) == Decision(GENERAL, wait=False)
    for _ in range(4):
        stage.run(GENERAL, accepted=0)
    plan = policy.plan(stage.view())
    assert plan.want == (CODE,), "an untried draft (prior 0.25) beats one accepting nothing"
    assert plan.urgent and plan.evictable == (GENERAL,)
    assert policy.choose(stage.view()) == Decision(CODE, wait=True)


def test_reactive_keeps_a_good_draft() -> None:
    stage, policy = _reactive_on_general(accepted=3)
    assert policy.plan(stage.view()).want == (GENERAL,)
    assert policy.choose(stage.view()) == Decision(GENERAL, wait=False)


def test_reactive_falls_back_to_a_resident_draft_when_its_choice_is_unusable() -> None:
    stage, policy = _reactive_on_general(accepted=0)
    policy.plan(stage.view())
    stage.unusable = frozenset({CODE, LEGAL})
    assert policy.choose(stage.view()) == Decision(GENERAL)


# ---------------------------------------------------------------- ucb / exp3
def test_ucb_tries_untried_drafts_resident_first() -> None:
    stage = Stage()
    stage.load(GENERAL)
    policy = _bound(stage, "ucb")
    assert policy.plan(stage.view()).want == (GENERAL,), "ties among untried arms go to the resident one"
    for _ in range(4):
        policy.observe(_feedback(stage, GENERAL, accepted=4), stage.view())
    plan = policy.plan(stage.view())
    assert plan.want == (CODE,), "an untried arm has an infinite index"
    assert policy.choose(stage.view()) == Decision(CODE, wait=True)


def test_ucb_resident_never_waits_learns_the_no_draft_arm_and_loads_in_the_background() -> None:
    stage = Stage()
    stage.load(GENERAL)
    stage.run(None, proposed=0, verify_s=0.02)  # a measured target-only step: the reward's unit
    policy = _bound(stage, "ucb-resident")
    assert policy.plan(stage.view()).want == (GENERAL,), "ties among untried arms go to the resident one"
    assert policy.choose(stage.view()) == Decision(GENERAL)
    for _ in range(4):  # the generalist is useless here: 30 ms for one token
        policy.observe(_feedback(stage, GENERAL, accepted=0), stage.view())
    plan = policy.plan(stage.view())
    assert plan.want == () and policy.choose(stage.view()) == Decision(None), "untried: the no-draft arm"
    for _ in range(4):  # 20 ms for one token: better than the useless draft
        policy.observe(RoundFeedback(round_index=stage.round_index, turn=0, turn_position=0, draft=None,
                                     proposed=0, accepted=0, emitted=1, seconds=0.02), stage.view())
    plan = policy.plan(stage.view())
    assert plan.want == (CODE,) and plan.evictable == (GENERAL,), "an untried draft is loaded in the background"
    assert policy.choose(stage.view()) == Decision(None), "meanwhile the best arm usable now runs, no wait"
    stage.load(CODE)
    policy.plan(stage.view())
    assert policy.choose(stage.view()) == Decision(CODE), "taken up once resident"
    for _ in range(8):
        policy.observe(_feedback(stage, CODE, accepted=4), stage.view())
    forecast = policy.plan(stage.view()).predictions
    assert forecast[CODE] > forecast[GENERAL] and policy.choose(stage.view()) == Decision(CODE)


def test_exp3_is_reproducible_from_its_seed_and_skips_unusable_drafts() -> None:
    def selections(seed: int) -> list[str | None]:
        stage = Stage()
        stage.unusable = frozenset({LEGAL})
        policy = _bound(stage, "exp3", seed=seed)
        out = []
        for _ in range(30):
            out.append(policy.plan(stage.view()).want[0])
            policy.observe(_feedback(stage, out[-1], accepted=2), stage.view())
        return out

    first = selections(3)
    assert first == selections(3)
    assert LEGAL not in first
    assert set(first) == {GENERAL, CODE}


# ---------------------------------------------------------------- hedge
def test_hedge_learns_from_counterfactual_scores_of_resident_drafts() -> None:
    stage = Stage()
    stage.load(GENERAL, CODE)
    policy = _bound(stage, "hedge")
    assert policy.wants_counterfactual
    for _ in range(3):
        policy.observe(_feedback(stage, GENERAL, accepted=0, counterfactual={CODE: 4}), stage.view())
    plan = policy.plan(stage.view())
    assert plan.want == (CODE,) and not plan.urgent
    assert plan.predictions[CODE] > plan.predictions[GENERAL]
    assert policy.choose(stage.view()) == Decision(CODE, wait=False)


# ---------------------------------------------------------------- memspec and ablations
def test_memspec_prefetches_the_forecast_and_never_waits() -> None:
    stage, predictor = _forecast_stage({GENERAL: 0.3, CODE: 0.8, LEGAL: 0.1})
    stage.load(GENERAL)
    policy = _bound(stage, "memspec", predictor=predictor)
    plan = policy.plan(stage.view())
    assert plan.want[0] == CODE and GENERAL in plan.want and LEGAL not in plan.want
    assert plan.predictions == pytest.approx({GENERAL: 0.3, CODE: 0.8, LEGAL: 0.1})
    assert policy.choose(stage.view()) == Decision(GENERAL, wait=False), "runs what is resident"
    stage.load(CODE)
    assert policy.choose(stage.view()) == Decision(CODE, wait=False), "swaps in the better draft once loaded"


def test_memspec_hint_raises_the_hinted_drafts_forecast() -> None:
    stage, predictor = _forecast_stage({GENERAL: 0.3, CODE: 0.2, LEGAL: 0.1})
    policy = _bound(stage, "memspec", predictor=predictor)
    stage.hint = "legal"
    plan = policy.plan(stage.view())
    assert plan.predictions[LEGAL] == pytest.approx(0.1 + 0.6 * 0.9)
    assert plan.want[0] == LEGAL


def test_memspec_runs_target_only_when_measured_times_say_so_and_probes() -> None:
    stage, predictor = _forecast_stage({GENERAL: 0.05, CODE: 0.05, LEGAL: 0.05})
    stage.load(GENERAL)
    policy = _bound(stage, "memspec", predictor=predictor)
    stage.run(GENERAL, accepted=0, draft_s=0.4)  # a slow draft accepting nothing
    stage.run(None, proposed=0, verify_s=0.02)
    policy.plan(stage.view())
    assert policy.choose(stage.view()) == Decision(None)
    for _ in range(policy.probe_every):
        policy.observe(_feedback(stage, None, proposed=0), stage.view())
    probe = policy.choose(stage.view())
    assert probe.draft == GENERAL and not probe.wait, "a probe round after a draftless stretch"


def test_memspec_makes_room_on_a_one_draft_budget_for_a_much_better_forecast() -> None:
    """The running draft fills a one-draft budget: it is evicted (last) for a draft forecast
    preempt_margin above it; without that, nothing better could ever load while it runs."""
    stage = Stage(budget_drafts=1)
    predictor = constant_predictor({GENERAL: 0.05, CODE: 0.1, LEGAL: 0.8}, stage.names)
    stage.load(GENERAL)
    policy = _bound(stage, "memspec", predictor=predictor)
    stage.run(GENERAL, accepted=1)
    stage.pool.set_active(GENERAL)
    plan = policy.plan(stage.view())
    assert plan.want == (LEGAL,) and plan.evictable == (GENERAL,)


def test_memspec_keeps_the_running_draft_when_the_forecast_gap_is_small() -> None:
    stage = Stage(budget_drafts=1)
    predictor = constant_predictor({GENERAL: 0.5, CODE: 0.1, LEGAL: 0.6}, stage.names)
    stage.load(GENERAL)
    policy = _bound(stage, "memspec", predictor=predictor)
    stage.pool.set_active(GENERAL)
    plan = policy.plan(stage.view())
    assert plan.want == (LEGAL,) and plan.evictable == (), "0.1 better is not worth the load's draftless rounds"


def _measured_loads(stage: Stage, *, load_s: float, slowdown: float) -> None:
    """Rounds with the general draft, quiet and during a load: what the runtime measures."""
    stage.mean_load_s = load_s
    for _ in range(4):
        stage.run(GENERAL, accepted=2, draft_s=0.004, verify_s=0.02)
        stage.run(GENERAL, accepted=2, draft_s=0.004, verify_s=0.02 * slowdown, loading=True)


def test_memspec_loads_only_what_repays_the_measured_load_cost() -> None:
    """A load slows decoding while it runs; a forecast lead too small to repay that over the
    turn's remaining tokens does not start one, a specialist's large lead does."""
    stage, predictor = _forecast_stage({GENERAL: 0.6, CODE: 0.66, LEGAL: 0.1})
    stage.load(GENERAL)
    policy = _bound(stage, "memspec", predictor=predictor)
    _measured_loads(stage, load_s=0.05, slowdown=1.8)
    assert stage.view().load_cost_s == pytest.approx(0.05 * 0.8)
    assert stage.tracker.summary().loading_slowdown == pytest.approx(1.8, rel=0.05)
    assert CODE not in policy.plan(stage.view()).want, "0.06 better does not repay 40 ms over 64 tokens"
    stage.remaining = 4000
    assert CODE in policy.plan(stage.view()).want, "over a long answer it does"
    stage.remaining = 0
    assert CODE in policy.plan(stage.view()).want, "between turns a load slows no decoding"
    stage.remaining = 64
    free = _bound(stage, "memspec", predictor=predictor)
    free.load_aware = False
    assert CODE in free.plan(stage.view()).want

    stage, predictor = _forecast_stage({GENERAL: 0.3, CODE: 0.8, LEGAL: 0.1})
    stage.load(GENERAL)
    policy = _bound(stage, "memspec", predictor=predictor)
    _measured_loads(stage, load_s=0.05, slowdown=1.8)
    assert policy.plan(stage.view()).want[0] == CODE, "a specialist's lead repays its load"


def test_net_of_load_matches_the_time_it_models() -> None:
    k, round_s, cost, horizon = 4, 0.01, 0.03, 100
    net = net_of_load(0.7, k, round_s, cost, horizon)
    with_load = horizon / (0.7 * k + 1) * round_s + cost
    assert horizon / (net * k + 1) * round_s == pytest.approx(with_load)
    assert net_of_load(0.7, k, round_s, 0.0, horizon) == 0.7
    assert net_of_load(0.7, k, round_s, 10.0, horizon) == 0.0
    assert net_of_load(0.7, k, round_s, cost, 0) == 0.0


def test_manage_only_does_not_preempt_for_untried_drafts() -> None:
    """Without a forecast, untried drafts count at the prior: preempting for them would cycle
    through every draft on a one-draft budget."""
    stage = Stage(budget_drafts=1)
    stage.load(GENERAL)
    policy = _bound(stage, "memspec-manage-only")
    for _ in range(4):
        stage.run(GENERAL, accepted=0)
    stage.pool.set_active(GENERAL)
    plan = policy.plan(stage.view())
    assert GENERAL not in plan.want and plan.evictable == ()


def test_memspec_skips_drafts_that_failed_to_load() -> None:
    stage, predictor = _forecast_stage({GENERAL: 0.3, CODE: 0.8, LEGAL: 0.1})
    stage.unusable = frozenset({CODE})
    policy = _bound(stage, "memspec", predictor=predictor)
    plan = policy.plan(stage.view())
    assert CODE not in plan.want and plan.predictions[CODE] == 0.0


def test_manage_only_plans_from_acceptance_alone() -> None:
    stage = Stage()
    stage.load(GENERAL)
    policy = _bound(stage, "memspec-manage-only")
    for _ in range(4):
        stage.run(GENERAL, accepted=4)
    plan = policy.plan(stage.view())
    assert plan.want[0] == GENERAL
    assert plan.predictions[GENERAL] == pytest.approx(1.0)
    assert plan.predictions[CODE] == pytest.approx(policy.prior)


def test_predict_only_waits_for_the_forecast_best() -> None:
    stage, predictor = _forecast_stage({GENERAL: 0.3, CODE: 0.8, LEGAL: 0.1})
    stage.load(GENERAL)
    policy = _bound(stage, "memspec-predict-only", predictor=predictor)
    plan = policy.plan(stage.view())
    assert plan.want == (CODE,) and plan.urgent
    assert policy.choose(stage.view()) == Decision(CODE, wait=True)


def test_only_the_predictor_policies_need_one() -> None:
    needing = {n for n in ("static", "reactive", "ucb", "exp3", "hedge", "ucb-resident", "memspec",
                           "memspec-predict-only", "memspec-manage-only", "oracle") if policy_class(n).needs_predictor}
    assert needing == {"memspec", "memspec-predict-only"}
    with pytest.raises(ValueError, match="needs a predictor"):
        make_policy("memspec")
    assert make_policy("memspec-manage-only", predictor="/no/such/file").name == "memspec-manage-only"
    with pytest.raises(ValueError, match="unknown policy"):
        policy_class("fastest")


# ---------------------------------------------------------------- oracle
def _trace(matches: dict[str, list[bool]]) -> DialogueTrace:
    n = len(next(iter(matches.values())))
    turn = TurnTrace(prompt="p", domain=None, max_new_tokens=n, prompt_ids=[1, 2], output_ids=list(range(n)),
                     finish_reason="length", match={d: np.array(m) for d, m in matches.items()})
    return DialogueTrace("hand", [turn])


def test_oracle_runs_the_draft_that_emits_most_over_the_segment() -> None:
    stage = Stage(budget_drafts=None)
    stage.load(GENERAL, CODE, LEGAL)
    trace = _trace({GENERAL: [False] * 40, CODE: [True, False] * 20, LEGAL: [True] * 40})
    policy = _bound(stage, "oracle", oracle=trace)
    assert policy.initial_working_set() == stage.names
    stage.remaining = 40
    assert policy.choose(stage.view()) == Decision(LEGAL)
    stage.remaining = 1  # nothing can be proposed: no choice to make
    assert policy.choose(stage.view()) == Decision(GENERAL)


def test_ucb_resident_has_the_ngram_member_as_an_arm() -> None:
    """The member is one more arm, always usable: a segment that selects it runs it on a match and plain
    steps otherwise, and every round of that segment is its reward (not only the rounds it matched)."""
    from memspec_ros.core.ngram_proposer import NGRAM_NAME

    stage = Stage(ngram=NGRAM_NAME)
    stage.load(GENERAL)
    stage.run(None, proposed=0, verify_s=0.02)
    policy = _bound(stage, "ucb-resident")
    plain = RoundFeedback(round_index=0, turn=0, turn_position=0, draft=None, proposed=0, accepted=0, emitted=1,
                          seconds=0.02)
    for _ in range(4):
        policy.observe(_feedback(stage, GENERAL, accepted=0), stage.view())
        policy.observe(plain, stage.view())
    policy.plan(stage.view())  # GENERAL and no-draft tried; the member's arm is untried: its index is infinite
    assert policy.selected == NGRAM_NAME
    assert policy.choose(stage.view(ngram_match=3)) == Decision(NGRAM_NAME)
    assert policy.choose(stage.view()) == Decision(None), "no match: a plain target step in its segment"
    before = policy._n[NGRAM_NAME]
    policy.observe(plain, stage.view())
    assert policy._n[NGRAM_NAME] > before, "that step is the member's segment's reward"
    assert NGRAM_NAME not in policy.plan(stage.view()).want, "never loaded"
    assert NGRAM_NAME not in policy.plan(stage.view()).predictions
