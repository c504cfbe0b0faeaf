"""The trace-driven simulator: exact tokens, same policy code, deterministic."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from memspec_ros.runtime import (
    POLICY_NAMES,
    Budget,
    CostModel,
    DraftRuntime,
    RuntimeConfig,
    Simulator,
    make_policy,
)
from memspec_ros.runtime.policies import MemSpecPolicy, OraclePolicy

from .rt_tiny_zoo import DIALOGUE


def _cost(world, load_s: float = 0.012) -> CostModel:
    names = world.catalogue.names
    return CostModel(verify_s={p: 0.004 + 0.0002 * p for p in range(5)},
                     draft_step_s={n: 0.0004 + 0.0001 * i for i, n in enumerate(names)},
                     draft_feed_s={n: (0.0006, 0.00001) for n in names}, prefill_s=(0.001, 0.00005),
                     load_s={n: load_s for n in names}, round_overhead_s=0.0003, tick_s=0.0001,
                     predictor_s=0.00005)


def _sim(world, policy: str, cost=None, **kw) -> Simulator:
    pol = make_policy(policy, predictor=world.predictor.restricted_to(world.catalogue.names), oracle=world.trace)
    sim = Simulator(world.catalogue, Budget.drafts(2), pol, cost or _cost(world), RuntimeConfig(), **kw)
    sim.warm_up()
    return sim


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_simulation_is_deterministic_and_token_exact(world, policy) -> None:
    a = _sim(world, policy).run(world.trace)
    b = _sim(world, policy).run(world.trace)
    assert [r.timeline for r in a.reports] == [r.timeline for r in b.reports]
    assert a.tokens_per_s == b.tokens_per_s
    assert [r.output_ids for r in a.reports] == [t.output_ids for t in world.trace.turns]
    assert sum(ev.emitted for r in a.reports for ev in r.timeline) == world.trace.generated_tokens


@pytest.mark.parametrize("policy", ["static", "oracle"])
def test_simulated_acceptance_matches_a_real_run(world, policy) -> None:
    """Policies whose choices do not depend on timing make identical rounds in both worlds."""
    pol = make_policy(policy, oracle=world.trace)
    with DraftRuntime(world.engine, world.catalogue, Budget.drafts(2), pol, RuntimeConfig()) as rt:
        rt.warm_up()
        real = rt.run_dialogue(DIALOGUE)
    sim = _sim(world, policy).run(world.trace)
    real_rounds = [(ev.draft, ev.proposed, ev.accepted, ev.emitted) for r in real for ev in r.timeline]
    sim_rounds = [(ev.draft, ev.proposed, ev.accepted, ev.emitted) for r in sim.reports for ev in r.timeline]
    assert real_rounds == sim_rounds


def test_stalls_cost_load_time_and_memspec_has_none(world) -> None:
    cost = _cost(world, load_s=0.05)
    reactive = _sim(world, "reactive", cost).run(world.trace)
    memspec = _sim(world, "memspec", cost).run(world.trace)
    assert reactive.stall_s > 0 and memspec.stall_s == 0.0
    assert memspec.tokens_per_s > reactive.tokens_per_s


def test_injected_load_failure_in_simulation(world) -> None:
    res = _sim(world, "memspec", fail_loads=["draft-copy"]).run(world.trace)
    assert any(r.outcome == "failed" and r.name == "draft-copy" for r in res.load_records)
    assert res.tokens == world.trace.generated_tokens


def test_memspec_probes_drafts_during_a_draftless_stretch(world) -> None:
    """Drafts so slow that target-only rounds win: memspec goes draftless but keeps probing.

    Without probes a draftless stretch observes nothing about the drafts and can never end
    within the turn; with them, no stretch is longer than ``probe_every`` rounds. The do-no-harm
    guard is off here: with drafts this slow it would (rightly) stop the probes too
    (test_throughput_guard.py).
    """
    names = world.catalogue.names
    slow_drafts = CostModel(verify_s={p: 0.004 + 0.0002 * p for p in range(5)},
                            draft_step_s=dict.fromkeys(names, 0.02), draft_feed_s={n: (0.02, 0.001) for n in names},
                            prefill_s=(0.001, 0.00005), load_s=dict.fromkeys(names, 0.012), round_overhead_s=0.0003,
                            tick_s=0.0001, predictor_s=0.00005)
    probe_every = 4
    pol = MemSpecPolicy(world.predictor.restricted_to(names), probe_every=probe_every, guard=False)
    sim = Simulator(world.catalogue, Budget.drafts(2), pol, slow_drafts, RuntimeConfig())
    sim.warm_up()
    result = sim.run(world.trace)
    streak = longest = 0
    drafted = draftless = 0
    for report in result.reports:
        for ev in report.timeline:
            if ev.draft is None and ev.proposed == 0:
                draftless += 1
                streak += 1
                longest = max(longest, streak)
            else:
                drafted += 1
                streak = 0
        streak = 0
    assert draftless > drafted, "the cost rule should prefer target-only rounds with drafts this slow"
    assert drafted > 0
    assert longest <= probe_every + 1  # +1: a turn's last round has room for no proposal


def _switches_off_segment_boundaries(world, trace, segment_rounds: int) -> int:
    pol = OraclePolicy(trace, segment_rounds=segment_rounds)
    sim = Simulator(world.catalogue, Budget.unlimited(), pol, _cost(world), RuntimeConfig())
    sim.warm_up()
    off = 0
    for report in sim.run(trace).reports:
        drafts = [ev.draft for ev in report.timeline if ev.proposed > 0]
        off += sum(1 for i in range(1, len(drafts)) if i % 4 and drafts[i] != drafts[i - 1])
    return off


def test_oracle_holds_its_hindsight_choice_for_a_segment(world) -> None:
    """The oracle picks the best draft per segment (4 rounds, restarted each turn), not per round.

    Match vectors are replaced by random ones so that the best draft changes often; the
    per-round oracle (``segment_rounds=1``) then switches mid-segment, the default never does.
    """
    trace = copy.deepcopy(world.trace)
    rng = np.random.default_rng(0)
    for turn in trace.turns:
        for name, match in turn.match.items():
            turn.match[name] = rng.random(len(match)) < 0.6
    assert _switches_off_segment_boundaries(world, trace, 4) == 0
    assert _switches_off_segment_boundaries(world, trace, 1) > 0
    with pytest.raises(ValueError, match="segment_rounds"):
        OraclePolicy(trace, segment_rounds=0)


def test_simulated_reports_fill_every_field_a_real_report_has(world) -> None:
    """One round loop: loads, predictor, tick and counterfactual time come from the same code."""
    memspec = _sim(world, "memspec")
    res = memspec.run(world.trace)
    loaded = sum(1 for r in res.load_records if r.outcome == "loaded")
    assert loaded > 0 and sum(r.loads for r in res.reports) == loaded
    assert sum(r.predictor_s for r in res.reports) == pytest.approx(res.predictor_calls * _cost(world).predictor_s)
    assert all(r.tick_s > 0 for r in res.reports)
    hedge = _sim(world, "hedge").run(world.trace)
    extra = sum(ev.extra_s for r in hedge.reports for ev in r.timeline)
    assert extra > 0 and sum(r.counterfactual_s for r in hedge.reports) == pytest.approx(extra)


def test_a_replay_refuses_a_turn_that_is_not_the_traces(world) -> None:
    sim = _sim(world, "static")
    sim.rounds.replay(world.trace, sim.runtime.policy)
    with pytest.raises(ValueError, match="turn 0 of trace"):
        sim.runtime.generate("a different prompt", 8, conversation=sim.runtime.new_conversation())
