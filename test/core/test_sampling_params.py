"""The logits -> probabilities transform (temperature and top-p)."""

from __future__ import annotations

import pytest
import torch

from memspec_ros.core.errors import InvalidRequestError
from memspec_ros.core.sampling import GREEDY, SamplingParams, logits_to_probs


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
