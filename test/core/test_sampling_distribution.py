"""End to end: sampled outputs of the engine follow the target's distribution.

A vocabulary of 8 tokens keeps the joint distribution of the first two generated tokens
small (64 cells), so a few thousand sessions give a sharp chi-square test. The exact
target probabilities come from direct target forwards with the same temperature/top-p
processing. A deliberately broken acceptance rule, plugged into the same engine, must fail.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from conftest import tiny_llama, word_tokenizer
from stat_helpers import chi_square_pvalue, exact_two_tokens, sample_two_tokens, total_variation

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.rejection_sampler import RejectionSampler
from memspec_ros.core.sampling import SamplingParams

V = 8
PROMPT = [3, 5]
PARAMS = SamplingParams(temperature=0.9, top_p=0.95, seed=1234)


class AlwaysAccept(RejectionSampler):
    @staticmethod
    def accept_probability(p_x, q_x):
        return torch.ones_like(p_x)


@pytest.fixture(scope="module")
def small_vocab():
    tokenizer = word_tokenizer(V)
    target = tiny_llama(V, 32, 1, seed=10, eos=None, init_range=0.6)
    draft = tiny_llama(V, 32, 1, seed=11, eos=None, init_range=0.6)
    return target, draft, tokenizer


def _exact(target) -> dict:
    return exact_two_tokens(target, PROMPT, PARAMS, V)


def _sample(engine: SpeculativeEngine, draft: DraftProposer, n: int) -> Counter:
    return sample_two_tokens(engine, draft, PROMPT, PARAMS, n)


def test_engine_samples_follow_target_distribution(small_vocab):
    target, draft_model, tokenizer = small_vocab
    exact = _exact(target)
    engine = SpeculativeEngine(target, tokenizer)
    draft = DraftProposer(draft_model, "other")
    counts = _sample(engine, draft, 2500)
    _, pvalue = chi_square_pvalue(counts, exact)
    assert pvalue > 1e-3, f"engine output differs from the target's distribution (p={pvalue:.2e})"
    assert total_variation(counts, exact) < 0.06

    broken = SpeculativeEngine(target, tokenizer, sampler=AlwaysAccept())
    bad_counts = _sample(broken, DraftProposer(draft_model, "other"), 800)
    _, bad_pvalue = chi_square_pvalue(bad_counts, exact)
    assert bad_pvalue < 1e-6, f"an always-accept engine was not detected (p={bad_pvalue:.2e})"


def test_same_seed_reproduces_same_output(small_vocab):
    target, draft_model, tokenizer = small_vocab
    engine = SpeculativeEngine(target, tokenizer)
    params = SamplingParams(temperature=1.0, seed=99)
    runs = [
        engine.generate(PROMPT, DraftProposer(draft_model, "d"), k=3, max_new_tokens=20, params=params).output_ids
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
