"""The n-gram member of the pool: policy decisions on hand-built views, and real and replayed runs.

It is always resident at 0 bytes and never loaded, so the pool, the budget and the predictor
never see it; a policy names it for a round and the runtime runs it like any draft. These tests
check that the output stays the target's own, that memspec uses it only when its measured
acceptance pays, and that the simulator replays its rounds exactly as the engine ran them.
"""

from __future__ import annotations

import pytest

from memspec_ros.core.ngram_proposer import NGRAM_NAME
from memspec_ros.runtime import Budget, Catalogue, DraftRuntime, RuntimeConfig, Simulator, make_policy
from memspec_ros.runtime.ngram_member import NgramSettings, NgramValue
from memspec_ros.runtime.policies.base import Decision, RoundFeedback
from memspec_ros.runtime.residency import DraftState

from .hand_built import Stage, constant_predictor
from .rt_tiny_zoo import DIALOGUE
from .test_simulator import _cost

GENERAL = "draft-general"
WITH_NGRAM = RuntimeConfig(ngram=NgramSettings())


def _memspec(stage: Stage, forecast: float = 0.05):
    policy = make_policy("memspec", predictor=constant_predictor(dict.fromkeys(stage.names, forecast), stage.names))
    policy.bind(stage.catalogue, stage.budget, 4)
    return policy


def _ngram_round(stage: Stage, policy, proposed: int, accepted: int) -> None:
    """memspec chose the member (its lookup matched); the round ran and is fed back as the runtime would."""
    assert policy.choose(stage.view(ngram_match=4)).draft == NGRAM_NAME
    stage.run(NGRAM_NAME, proposed=proposed, accepted=accepted, draft_s=0.0001,
              verify_s=0.03)  # verifying 4 tokens costs more than a step
    policy.observe(RoundFeedback(round_index=stage.round_index, turn=0, turn_position=0, draft=NGRAM_NAME,
                                 proposed=proposed, accepted=accepted, emitted=accepted + 1, seconds=0.03),
                   stage.view())


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="must not exceed"):
        NgramSettings(min_n=4, max_n=2)
    with pytest.raises(ValueError, match="ngram_n must be an int in"):
        NgramSettings(min_n=0)


def test_memspec_uses_the_member_instead_of_a_draftless_round_while_it_pays() -> None:
    stage = Stage(ngram=NGRAM_NAME)
    stage.load(GENERAL)
    policy = _memspec(stage)
    stage.run(GENERAL, accepted=0, draft_s=0.4)  # a slow draft accepting nothing
    stage.run(None, proposed=0, verify_s=0.02)
    policy.plan(stage.view())
    assert policy.choose(stage.view()) == Decision(None), "no match this round: nothing to propose"
    assert policy.choose(stage.view(ngram_match=4)) == Decision(NGRAM_NAME, k=4), "a match is tried"
    assert policy.choose(stage.view(ngram_match=2)).k == 2, "never longer than the match"
    for _ in range(6):  # matches the target accepts in full
        _ngram_round(stage, policy, proposed=4, accepted=4)
    for _ in range(12):  # then matches the target rejects
        if policy.choose(stage.view(ngram_match=4)).draft != NGRAM_NAME:
            break
        _ngram_round(stage, policy, proposed=4, accepted=0)
    assert policy.choose(stage.view(ngram_match=4)) == Decision(None), "rejected proposals cost a verification each"
    assert policy.ngram_value.acceptance < 0.2


def test_memspec_prefers_a_matching_member_to_a_weaker_resident_draft() -> None:
    stage = Stage(ngram=NGRAM_NAME)
    stage.load(GENERAL)
    policy = _memspec(stage, forecast=0.3)
    stage.run(GENERAL, accepted=1, draft_s=0.01)
    stage.run(None, proposed=0, verify_s=0.02)
    policy.plan(stage.view())
    policy.ngram_value = NgramValue(prior_acceptance=0.9)
    assert policy.choose(stage.view(ngram_match=4)).draft == NGRAM_NAME
    assert policy.choose(stage.view()).draft == GENERAL, "no match: the draft"
    policy.ngram_value = NgramValue(prior_acceptance=0.05)
    assert policy.choose(stage.view(ngram_match=4)).draft == GENERAL, "a match the target mostly rejects"
    no_ngram = make_policy("memspec", predictor=constant_predictor(dict.fromkeys(stage.names, 0.3), stage.names))
    no_ngram.bind(stage.catalogue, stage.budget, 4)
    no_ngram.use_ngram = False
    no_ngram.plan(stage.view())
    assert no_ngram.choose(stage.view(ngram_match=4)).draft == GENERAL, "memspec-no-ngram never runs it"


def test_member_rounds_count_toward_the_next_probe_of_the_model_drafts() -> None:
    stage = Stage(ngram=NGRAM_NAME)
    stage.load(GENERAL)
    policy = _memspec(stage)
    stage.run(GENERAL, accepted=0, draft_s=0.4)
    stage.run(None, proposed=0, verify_s=0.02)
    policy.plan(stage.view())
    for _ in range(policy.probe_every):
        _ngram_round(stage, policy, proposed=4, accepted=3)
    probe = policy.choose(stage.view(ngram_match=4))
    assert probe.draft == GENERAL, "a probe of the model draft after a stretch without one"


def test_static_can_run_the_member_alone() -> None:
    stage = Stage(ngram=NGRAM_NAME)
    policy = make_policy("static", static_draft=NGRAM_NAME)
    policy.bind(stage.catalogue, stage.budget, 4)
    assert policy.initial_working_set() == []
    assert policy.choose(stage.view()) == Decision(NGRAM_NAME)
    assert policy.plan(stage.view()).want == ()
    assert policy.choose(Stage().view()) == Decision(None), "a runtime without the member runs target-only"


def _reference(engine) -> list[list[int]]:
    session, outs = None, []
    for t in DIALOGUE:
        session = engine.run_turn(session, t.prompt, t.max_new_tokens)
        outs.append(list(session.output_ids))
    return outs


def test_memspec_with_the_member_is_lossless(world) -> None:
    """Whether memspec runs the member here depends on measured step times (tiny models time noisily):
    the output must be the target's either way; test_static_... pins the member on."""
    catalogue = Catalogue(s for s in world.catalogue if s.name in ("draft-general", "draft-robot"))
    policy = make_policy("memspec", predictor=world.predictor.restricted_to(catalogue.names))
    with DraftRuntime(world.engine, catalogue, Budget.drafts(1), policy, WITH_NGRAM) as rt:
        rt.warm_up()
        reports = rt.run_dialogue(DIALOGUE)
        assert [r.output_ids for r in reports] == _reference(world.engine)
        assert rt.member_names == [*catalogue.names, NGRAM_NAME]


def test_ucb_resident_with_the_member_arm_is_lossless(world) -> None:
    """ucb-resident tries every arm, the member's included: whatever it then selects, the output is the target's."""
    catalogue = Catalogue(s for s in world.catalogue if s.name in ("draft-general", "draft-robot"))
    policy = make_policy("ucb-resident")
    with DraftRuntime(world.engine, catalogue, Budget.drafts(1), policy, WITH_NGRAM) as rt:
        rt.warm_up()
        reports = rt.run_dialogue(DIALOGUE)
        assert [r.output_ids for r in reports] == _reference(world.engine)
    assert policy._n.get(NGRAM_NAME, 0.0) > 0, "its arm was tried"


def test_the_member_runs_outside_the_pool_and_shows_under_its_name(world) -> None:
    policy = make_policy("static", static_draft=NGRAM_NAME)
    with DraftRuntime(world.engine, world.catalogue, Budget.drafts(1), policy, WITH_NGRAM) as rt:
        rt.warm_up()
        reports = rt.run_dialogue(DIALOGUE)
        assert [r.output_ids for r in reports] == _reference(world.engine)
        assert rt.pool.resident() == [] and all(d.name != NGRAM_NAME for d in rt.pool.snapshot().drafts)
        used = rt.tracker.summary().per_draft[NGRAM_NAME]
        assert used.rounds > 0 and used.proposed > 0, "the tiny target's text loops: lookups match"
        assert rt.window_stats(rounds=64)["per_draft"][NGRAM_NAME]["rounds"] > 0
        assert any(NGRAM_NAME in r.drafts_used for r in reports)
        assert rt.residency().status(NGRAM_NAME).state == DraftState.RESIDENT


def test_sampling_with_the_member_runs_and_keeps_the_seed(world) -> None:
    from memspec_ros.core.sampling import SamplingParams

    policy = make_policy("static", static_draft=NGRAM_NAME)
    with DraftRuntime(world.engine, world.catalogue, Budget.drafts(1), policy, WITH_NGRAM) as rt:
        reports = rt.run_dialogue(DIALOGUE, SamplingParams(temperature=0.8, seed=11))
    again = make_policy("static", static_draft=NGRAM_NAME)
    with DraftRuntime(world.engine, world.catalogue, Budget.drafts(1), again, WITH_NGRAM) as rt:
        replay = rt.run_dialogue(DIALOGUE, SamplingParams(temperature=0.8, seed=11))
    assert [r.output_ids for r in reports] == [r.output_ids for r in replay], "the same choices, the same sample"


def test_the_simulator_replays_member_rounds_as_the_engine_ran_them(world) -> None:
    with DraftRuntime(world.engine, world.catalogue, Budget.drafts(2), make_policy("static", static_draft=NGRAM_NAME),
                      WITH_NGRAM) as rt:
        real = rt.run_dialogue(DIALOGUE)
    sim = Simulator(world.catalogue, Budget.drafts(2), make_policy("static", static_draft=NGRAM_NAME), _cost(world),
                    WITH_NGRAM).run(world.trace)
    real_rounds = [(ev.draft, ev.proposed, ev.accepted, ev.emitted) for r in real for ev in r.timeline]
    sim_rounds = [(ev.draft, ev.proposed, ev.accepted, ev.emitted) for r in sim.reports for ev in r.timeline]
    assert real_rounds == sim_rounds
    assert any(d == NGRAM_NAME for d, *_ in sim_rounds)
    assert [r.output_ids for r in sim.reports] == [t.output_ids for t in world.trace.turns]


def test_member_rounds_are_not_draft_switches_and_the_topic_shows_it_active() -> None:
    from memspec_ros.runtime.runtime import GenerationReport

    report = GenerationReport(output_ids=[], text="", finish_reason="", wall_s=0.0)
    for draft in ("draft-general", NGRAM_NAME, "draft-general", NGRAM_NAME, "draft-code"):
        report.record_round(draft, 4, 1, 0.0)
    assert report.switches == 1, "only general -> code is a switch (a catch-up forward)"
    assert report.drafts_used == ["draft-general", NGRAM_NAME, "draft-code"]
    stage = Stage(ngram=NGRAM_NAME)
    stage.load(GENERAL)
    stage.pool.set_active(GENERAL)
    shown = stage.pool.snapshot().with_member(NGRAM_NAME, "repeats", active=True)
    assert shown.active == NGRAM_NAME and [d.name for d in shown.drafts if d.active] == [NGRAM_NAME]
    assert shown.status(NGRAM_NAME).size_bytes == 0 and shown.used_bytes == stage.pool.snapshot().used_bytes
