"""Greedy outputs compared up to a low-precision tie: equal, a tie, or a real difference."""

from __future__ import annotations

import torch
from conftest import tiny_llama

from memspec_ros.core.greedy_ties import TIE_STEPS, divergence, first_difference


def test_first_difference() -> None:
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2


def test_a_close_second_choice_is_a_tie_and_a_far_one_is_not() -> None:
    model = tiny_llama(64, 32, 1, seed=4, eos=None, init_range=0.6).to(torch.bfloat16)
    context, reference = [3, 9, 12], [7, 7]
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([context])).logits[0, -1].float()
    ref_logit = float(logits[reference[0]])
    others = [t for t in range(64) if t != reference[0]]
    close = min(others, key=lambda t: abs(float(logits[t]) - ref_logit))
    far = min(others, key=lambda t: float(logits[t]))
    assert divergence(model, context, reference, reference) is None
    found = divergence(model, context, reference, [close, 7])
    assert found.index == 0 and found.output_token == close
    assert abs(found.margin - (ref_logit - float(logits[close]))) < 1e-6
    assert found.is_tie == (abs(found.margin) <= found.tolerance)
    assert not divergence(model, context, reference, [far, 7]).is_tie, "a token the target rates far below"
    assert not divergence(model, context, reference, reference[:1]).is_tie, "a shorter output is never a tie"


def test_float32_ties_are_in_the_last_bits_only() -> None:
    assert TIE_STEPS[torch.float32] <= 2 < TIE_STEPS[torch.bfloat16]
