"""Dynamic speculation length: the round model and the choice of k (microseconds; no models)."""

from __future__ import annotations

import pytest

from memspec_ros.runtime.policies import make_policy
from memspec_ros.runtime.speculation_length import (
    best_length,
    expected_emitted,
    per_token_acceptance,
)

from .hand_built import Stage, constant_predictor


def test_expected_emitted_is_the_geometric_prefix_plus_one() -> None:
    assert expected_emitted(0.0, 4) == 1.0
    assert expected_emitted(1.0, 4) == 5.0
    assert expected_emitted(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)
    assert expected_emitted(0.7, 0) == 1.0


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.6, 0.9])
def test_acceptance_rate_converts_back_to_the_per_token_probability(alpha: float) -> None:
    rate = (expected_emitted(alpha, 4) - 1.0) / 4
    assert per_token_acceptance(rate, 4) == pytest.approx(alpha, abs=1e-6)
    assert per_token_acceptance(0.0, 4) == 0.0 and per_token_acceptance(1.0, 4) == 1.0


def test_longer_proposals_only_when_acceptance_pays_for_them() -> None:
    step, verify = 0.001, 0.010  # a draft step is a tenth of a verification
    assert best_length(0.95, step, verify, 8).k == 8
    assert best_length(0.05, step, verify, 8).k == 1
    middling = best_length(0.5, step, verify, 8)
    assert 1 < middling.k < 8
    assert middling.tokens_per_s == pytest.approx(expected_emitted(0.5, middling.k) / (middling.k * step + verify))


def test_memspec_shortens_proposals_for_a_middling_forecast_instead_of_dropping_the_draft() -> None:
    stage = Stage()
    stage.load("draft-general", "draft-code")
    for _ in range(3):  # measured: a draft step 7.5 ms, verification 20 ms, a target step 20 ms
        stage.run("draft-code", proposed=4, accepted=1, draft_s=0.030, verify_s=0.020)
        stage.run(None, proposed=0, verify_s=0.020)
    forecast = {"draft-general": 0.05, "draft-code": 0.25}
    fixed = make_policy("memspec", predictor=constant_predictor(forecast, stage.names))
    fixed.dynamic_k = False
    dynamic = make_policy("memspec", predictor=constant_predictor(forecast, stage.names))
    for policy in (fixed, dynamic):
        policy.bind(stage.catalogue, stage.budget, 4)
        policy.plan(stage.view())
    assert fixed.choose(stage.view()).draft is None, "at k=4 the draft round is slower than the target alone"
    decision = dynamic.choose(stage.view())
    assert decision.draft == "draft-code" and decision.k is not None and 1 <= decision.k < 4
