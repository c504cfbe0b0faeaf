"""The simulator's cost model: measured on real components, serialisable, sensible."""

from __future__ import annotations

import dataclasses

import pytest

from memspec_ros.runtime import CostModel, make_materializer, measure_cost_model
from memspec_ros.runtime.cost_model import min_cost_model

from .rt_tiny_zoo import DIALOGUE


def test_measured_cost_model(world) -> None:
    cat = world.catalogue
    mat = make_materializer(cat)
    names = ["draft-robot", "draft-copy"]
    proposers = {n: mat(cat.get(n), [p.read_bytes() for p in cat.get(n).weight_files]) for n in names}
    ctx = [t for turn in world.trace.turns for t in (*turn.prompt_ids, *turn.output_ids)]
    cost = measure_cost_model(world.engine.target, proposers, ctx, 4, repeats=3, engine=world.engine,
                              round_prompts=[DIALOGUE[0].prompt], max_new_tokens=12)
    assert set(cost.verify_s) >= {0, 4} and all(v > 0 for v in cost.verify_s.values())
    for n in names:
        assert cost.propose_s(n, 4, 1) > 0
        assert cost.propose_s(n, 4, 64) >= cost.propose_s(n, 4, 1)  # catch-up costs extra
    assert cost.verify(4, 400) >= cost.verify(4, 10)
    again = CostModel.from_json(cost.to_json())
    assert again.propose_s("draft-copy", 3, 1) == cost.propose_s("draft-copy", 3, 1)
    assert again.verify(4, 100) == cost.verify(4, 100)
    low = min_cost_model([cost, again])
    assert low.verify_s == cost.verify_s


def test_context_slope_of_a_target_step_is_its_own_and_longer_verifications_interpolate() -> None:
    """A one-token step attends from one position, a k+1-token verification from k+1: their context slopes differ."""
    cost = CostModel(verify_s={0: 0.010, 2: 0.012, 4: 0.014}, draft_step_s={}, draft_feed_s={},
                     verify_ref_len=100, verify_slope_s=5e-5, step_slope_s=1e-5)
    assert cost.verify(0, 300) == pytest.approx(0.010 + 200 * 1e-5)
    assert cost.verify(4, 300) == pytest.approx(0.014 + 200 * 5e-5)
    assert cost.verify(2, 300) == pytest.approx(0.012 + 200 * 3e-5)
    assert cost.compute_scaled(2.0).verify(0, 300) == pytest.approx(2 * (0.010 + 200 * 1e-5))
    legacy = CostModel.from_json(dataclasses.replace(cost, step_slope_s=None).to_json())
    assert legacy.verify(0, 300) == pytest.approx(0.010 + 200 * 5e-5), "older results: one slope for every length"
