"""The logits -> probabilities transform (temperature, top-k, top-p) and seeds."""

from __future__ import annotations

import pytest
import torch

from memspec_ros.core.errors import InvalidRequestError
from memspec_ros.core.sampling import GREEDY, MAX_SEED, SamplingParams, logits_to_probs


def test_temperature_scales_logits():
    logits = torch.tensor([2.0, 1.0, 0.0])
    probs = logits_to_probs(logits, SamplingParams(temperature=0.5))
    torch.testing.assert_close(probs, torch.softmax(logits / 0.5, -1))


def test_top_p_keeps_smallest_nucleus_and_renormalises():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    out = logits_to_probs(probs.log(), SamplingParams(temperature=1.0, top_p=0.8))
    torch.testing.assert_close(out, torch.tensor([0.5, 0.3, 0.0, 0.0]) / 0.8)
    out = logits_to_probs(probs.log(), SamplingParams(temperature=1.0, top_p=0.81))
    torch.testing.assert_close(out, torch.tensor([0.5, 0.3, 0.15, 0.0]) / 0.95)
    out = logits_to_probs(probs.log(), SamplingParams(temperature=1.0, top_p=0.1))
    torch.testing.assert_close(out, torch.tensor([1.0, 0.0, 0.0, 0.0]))


def test_batched_rows_are_independent():
    logits = torch.randn(3, 10, generator=torch.Generator().manual_seed(0))
    params = SamplingParams(temperature=0.7, top_p=0.6)
    batched = logits_to_probs(logits, params)
    for row in range(3):
        torch.testing.assert_close(batched[row], logits_to_probs(logits[row], params))


def test_greedy_has_no_distribution():
    assert GREEDY.greedy
    with pytest.raises(InvalidRequestError):
        logits_to_probs(torch.zeros(3), GREEDY)


def test_seeded_generators_repeat():
    a = SamplingParams(temperature=1.0, seed=42).make_generator()
    b = SamplingParams(temperature=1.0, seed=42).make_generator()
    assert torch.equal(torch.rand(4, generator=a), torch.rand(4, generator=b))


def test_top_k_keeps_the_k_most_likely_and_ties_with_the_kth():
    probs = torch.tensor([0.4, 0.3, 0.2, 0.1])
    out = logits_to_probs(probs.log(), SamplingParams(temperature=1.0, top_k=2))
    torch.testing.assert_close(out, torch.tensor([0.4, 0.3, 0.0, 0.0]) / 0.7)
    tied = torch.tensor([0.4, 0.2, 0.2, 0.2])
    out = logits_to_probs(tied.log(), SamplingParams(temperature=1.0, top_k=2))
    torch.testing.assert_close(out, tied)  # every token tied with the 2nd is kept
    for k in (0, 4, 100):  # off, or at least the vocabulary: no truncation
        torch.testing.assert_close(logits_to_probs(probs.log(), SamplingParams(temperature=1.0, top_k=k)), probs)


def test_top_k_then_top_p_is_what_transformers_samples_from():
    """The target's own sampling with transformers' warpers (temperature, top-k, top-p, in that order)."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(3))
    for t, k, p in ((0.8, 10, 0.7), (1.3, 3, 0.95), (1.0, 20, 1.0), (0.5, 0, 0.5)):
        warped = TemperatureLogitsWarper(t)(None, logits.clone())
        if k:
            warped = TopKLogitsWarper(k)(None, warped)
        if p < 1.0:
            warped = TopPLogitsWarper(p)(None, warped)
        expected = torch.softmax(warped, dim=-1)
        torch.testing.assert_close(logits_to_probs(logits, SamplingParams(temperature=t, top_k=k, top_p=p)),
                                   expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("top_k", [-1, 2**31, 1.5, True])
def test_bad_top_k_is_refused(top_k):
    with pytest.raises(InvalidRequestError, match="top_k"):
        SamplingParams(temperature=1.0, top_k=top_k)


def test_a_drawn_seed_is_reported_and_replays():
    drawn = SamplingParams(temperature=1.0).with_drawn_seed()
    assert drawn.seed is not None and 1 <= drawn.seed <= MAX_SEED
    assert SamplingParams(temperature=1.0).with_drawn_seed().seed != drawn.seed  # fresh per call
    fixed = SamplingParams(temperature=1.0, seed=5)
    assert fixed.with_drawn_seed() is fixed
    replay = SamplingParams(temperature=1.0, seed=drawn.seed)
    first, again = drawn.make_generator(), replay.make_generator()
    assert torch.equal(torch.rand(4, generator=first), torch.rand(4, generator=again))
