"""End to end: sampled outputs of the engine follow the target's distribution.

A vocabulary of 8 tokens keeps the joint distribution of the first two generated tokens
small (64 cells), so a few thousand sessions give a sharp chi-square test. The exact
target probabilities come from direct target forwards with the same temperature/top-k/top-p
processing (the target's own truncated sampling): lossless means distributed as that, with
the draft's proposals drawn from the draft's distribution under the same truncation. A
deliberately broken acceptance rule, plugged into the same engine, must fail.
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
SETTINGS = {
    "top_p": SamplingParams(temperature=0.9, top_p=0.95, seed=1234),
    "top_k": SamplingParams(temperature=0.9, top_k=3, seed=1234),
    "top_k+top_p": SamplingParams(temperature=1.3, top_k=5, top_p=0.8, seed=1234),
}
SAMPLES = {"top_p": 2500, "top_k": 1200, "top_k+top_p": 1600}
"""Sessions per setting: top-k leaves at most 9 and 25 of the 64 cells, which fewer samples pin down."""


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


def _exact(target, params: SamplingParams) -> dict:
    return exact_two_tokens(target, PROMPT, params, V)


def _sample(engine: SpeculativeEngine, draft: DraftProposer, n: int, base: SamplingParams) -> Counter:
    return sample_two_tokens(engine, draft, PROMPT, base, n)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_engine_samples_follow_target_distribution(small_vocab, setting):
    target, draft_model, tokenizer = small_vocab
    params = SETTINGS[setting]
    exact = _exact(target, params)
    engine = SpeculativeEngine(target, tokenizer)
    draft = DraftProposer(draft_model, "other")
    counts = _sample(engine, draft, SAMPLES[setting], params)
    _, pvalue = chi_square_pvalue(counts, exact)
    assert pvalue > 1e-3, f"engine output differs from the target's distribution (p={pvalue:.2e})"
    assert total_variation(counts, exact) < 0.06
    outside = {cell: n for cell, n in counts.items() if exact[cell] == 0.0}
    assert not outside, f"tokens the target's truncation excludes were emitted: {outside}"

    broken = SpeculativeEngine(target, tokenizer, sampler=AlwaysAccept())
    bad_counts = _sample(broken, DraftProposer(draft_model, "other"), 800 if setting == "top_p" else 500, params)
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
