"""The n-gram proposer (prompt lookup): what it proposes, and that the engine stays exact with it.

It is tested the way the model drafts are: greedy output equal to the target's own greedy
output, and sampled output distributed as the target's (a chi-square test that also catches a
broken acceptance rule)."""

from __future__ import annotations

import random

import pytest
import torch
from conftest import tiny_llama, word_tokenizer
from stat_helpers import chi_square_pvalue, exact_two_tokens, sample_two_tokens, total_variation

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.ngram_proposer import NgramProposer, lookup
from memspec_ros.core.rejection_sampler import RejectionSampler
from memspec_ros.core.sampling import GREEDY, SamplingParams


def test_lookup_takes_the_longest_recurring_ngram_and_its_latest_occurrence() -> None:
    assert lookup([1, 2, 3, 4, 5, 1, 2, 3], 3) == [4, 5, 1]
    assert lookup([1, 2, 3, 4, 5, 9, 2, 3], 3) == [4, 5, 9], "falls back to the bigram"
    # [2, 3] occurs twice before the suffix; the latest occurrence (followed by 8) wins
    assert lookup([2, 3, 7, 0, 2, 3, 8, 0, 2, 3], 2) == [8, 0]
    # the 3-gram [0, 2, 3] beats the later bigram
    assert lookup([0, 2, 3, 6, 1, 2, 3, 5, 0, 2, 3], 1) == [6]
    assert lookup([1, 2, 3, 4], 4) == [], "nothing recurs"
    assert lookup([1, 2, 1, 2], 4, min_n=2, max_n=2) == [1, 2]
    assert lookup([5, 1, 2, 3, 1, 2], 0) == []
    assert lookup([1, 2, 9, 1, 2], 3, min_n=3, max_n=4) == [], "shorter than min_n does not count"


def _naive_lookup(context: list[int], k: int, min_n: int, max_n: int, window: int) -> list[int]:
    """The definition, spelled out: the longest n first, the latest occurrence with a follower."""
    ids = context[-window:]
    for n in range(min(max_n, len(ids) - 1), min_n - 1, -1):
        for s in range(len(ids) - n - 1, -1, -1):
            if ids[s:s + n] == ids[len(ids) - n:]:
                return ids[s + n:s + n + k]
    return []


def test_the_byte_search_finds_what_the_definition_says() -> None:
    """lookup searches the ids' bytes: a hit straddling two tokens' bytes must not count, large
    ids (several non-zero bytes) must match whole, and the search window must cut as stated."""
    rng = random.Random(3)
    for _ in range(3000):
        vocab = rng.choice([2, 3, 7, 256, 65537, 2**31 - 1])
        common = [0, 1, 255, 256, 65536, vocab - 1]
        context = [rng.randrange(vocab) if rng.random() < 0.5 else rng.choice(common) % vocab
                   for _ in range(rng.randint(0, 50))]
        k, min_n = rng.randint(0, 5), rng.randint(1, 3)
        max_n, window = rng.randint(min_n, 5), rng.choice([4096, 6, 17])
        assert lookup(context, k, min_n, max_n, window) == _naive_lookup(context, k, min_n, max_n, window), context


def test_bad_sizes_are_refused_with_the_rule() -> None:
    with pytest.raises(ValueError, match="min_n <= max_n"):
        NgramProposer(10, min_n=3, max_n=2)
    with pytest.raises(ValueError, match="1 <= min_n"):
        NgramProposer(10, min_n=0, max_n=2)


PROMPTS = ("The robot moves to the kitchen and the robot moves", "def add(a, b):\n    return a + b\ndef add(",
           "Solve 3x + 5 = 20")


@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_output_is_the_targets(tiny_zoo, k: int) -> None:
    engine = tiny_zoo.engine
    proposer = NgramProposer(engine.vocab_size)
    proposed = 0
    for prompt in PROMPTS:
        reference = engine.target_greedy(prompt, 40)
        state = engine.generate(prompt, proposer, k=k, max_new_tokens=40)
        assert state.output_ids == reference, (k, prompt)
        proposed += sum(s.proposed for s in state.stats)
        assert all(s.draft_name in (None, "ngram") for s in state.stats)
    assert proposed > 0, "the prompts repeat themselves: the proposer must have proposed"


def test_it_accepts_what_repeats(zoo_engine) -> None:
    """Text the target wrote before comes back: lookup proposes it and the (trained) target accepts it."""
    engine, _ = zoo_engine
    prompt = engine.encode("USER: Go to the kitchen and bring me the red cup.\nROBOT:")
    first = engine.target_greedy(prompt, 30)
    again = [*prompt, *first, *prompt]  # the same opening once more: the same answer is likely
    state = engine.generate(again, NgramProposer(engine.vocab_size), k=4, max_new_tokens=30)
    assert state.output_ids == engine.target_greedy(again, 30)
    assert sum(s.accepted for s in state.stats) > 0
    assert len(state.stats) < len(state.output_ids), "fewer rounds than tokens"


V = 8
PROMPT = [3, 5, 1, 6, 3, 5]
"""The last bigram recurs: the proposer proposes ``[1, 6]`` for the first round."""


class AlwaysAccept(RejectionSampler):
    @staticmethod
    def accept_probability(p_x, q_x):
        return torch.ones_like(p_x)


@pytest.mark.parametrize("params", [SamplingParams(temperature=0.9, top_p=0.95, seed=77),
                                    SamplingParams(temperature=1.3, top_k=5, seed=78)], ids=["top_p", "top_k"])
def test_sampled_output_follows_the_targets_distribution(params: SamplingParams) -> None:
    target = tiny_llama(V, 32, 1, seed=10, eos=None, init_range=0.6)
    tokenizer = word_tokenizer(V)
    exact = exact_two_tokens(target, PROMPT, params, V)
    proposer = NgramProposer(V)
    assert lookup(PROMPT, 2) == [1, 6]
    counts = sample_two_tokens(SpeculativeEngine(target, tokenizer), proposer, PROMPT, params, 2000)
    _, pvalue = chi_square_pvalue(counts, exact)
    assert pvalue > 1e-3, f"output differs from the target's distribution (p={pvalue:.2e})"
    assert total_variation(counts, exact) < 0.06
    bad = sample_two_tokens(SpeculativeEngine(target, tokenizer, sampler=AlwaysAccept()), proposer, PROMPT,
                            params, 1200)
    _, bad_pvalue = chi_square_pvalue(bad, exact)
    assert bad_pvalue < 1e-6, f"an always-accept engine was not detected (p={bad_pvalue:.2e})"


def test_a_proposal_is_one_hot_when_sampling_and_bare_when_greedy() -> None:
    proposer = NgramProposer(V)
    greedy = proposer.propose(PROMPT, 2, GREEDY)
    assert greedy.tokens == [1, 6] and greedy.draft_probs is None
    sampled = proposer.propose(PROMPT, 2, SamplingParams(temperature=0.7, seed=1))
    assert sampled.draft_probs.shape == (2, V)
    assert sampled.draft_probs.sum(dim=1).tolist() == [1.0, 1.0]
    assert sampled.draft_probs[0, 1] == 1.0 and sampled.draft_probs[1, 6] == 1.0
    assert proposer.cache_nbytes() == 0
