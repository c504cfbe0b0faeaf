"""The trace-driven simulator: exact tokens, same policy code, deterministic."""

from __future__ import annotations

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
