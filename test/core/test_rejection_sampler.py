"""Unit tests of the acceptance rules, including a distribution test on a Markov-chain toy.

The toy: target and draft are first-order Markov chains over 6 tokens (transition matrices
P and Q), so exact joint probabilities of the first two emitted tokens are known in closed
form. We run the full speculative loop (propose from Q, verify against P) many times and
check the empirical joint distribution. Two deliberately broken rules must fail the same
test, which shows the test has teeth.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from stat_helpers import chi_square_pvalue, total_variation

from memspec_ros.core.rejection_sampler import RejectionSampler
from memspec_ros.core.sampling import GREEDY, SamplingParams

V = 6
START = 0


def _chains() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    p = torch.softmax(2.0 * torch.randn(V, V, generator=gen), dim=-1)
    q = torch.softmax(2.0 * torch.randn(V, V, generator=gen), dim=-1)
    return p, q


class AlwaysAccept(RejectionSampler):
    """Broken: accepts every proposal (output follows the draft)."""

    @staticmethod
    def accept_probability(p_x, q_x):
        return torch.ones_like(p_x)


class ResampleFromTarget(RejectionSampler):
    """Broken: on rejection samples from p instead of the residual norm(max(0, p - q))."""

    @staticmethod
    def residual(p, q):
        return p


def _first_two_tokens(sampler: RejectionSampler, k: int, n: int, seed: int) -> Counter:
    """Empirical joint distribution of the first two tokens emitted by speculative rounds."""
    p, q = _chains()
    params = SamplingParams(temperature=1.0, seed=seed)
    gen = params.make_generator()
    counts: Counter = Counter()
    log_p = torch.log(p)
    for _ in range(n):
        seq = [START]
        while len(seq) < 3:
            proposed, rows = [], []
            prev = seq[-1]
            for _ in range(k):
                tok = int(torch.multinomial(q[prev], 1, generator=gen))
                proposed.append(tok)
                rows.append(q[prev])
                prev = tok
            context = [seq[-1], *proposed]
            target_logits = log_p[context]  # row i: target's next-token logits after context[i]
            verdict = sampler.verify(proposed, torch.stack(rows), target_logits, params, gen)
            seq.extend(verdict.tokens)
        counts[(seq[1], seq[2])] += 1
    return counts


def _exact_first_two() -> dict:
    p, _ = _chains()
    return {(a, b): float(p[START, a] * p[a, b]) for a in range(V) for b in range(V)}


@pytest.mark.parametrize("k", [1, 3])
def test_speculative_sampling_matches_target_distribution(k):
    counts = _first_two_tokens(RejectionSampler(), k, n=6000, seed=1)
    _, pvalue = chi_square_pvalue(counts, _exact_first_two())
    assert pvalue > 1e-3, f"distribution differs from the target's (p={pvalue:.2e})"
    assert total_variation(counts, _exact_first_two()) < 0.05


@pytest.mark.parametrize("broken", [AlwaysAccept, ResampleFromTarget])
def test_broken_rules_fail_the_same_test(broken):
    counts = _first_two_tokens(broken(), 3, n=6000, seed=1)
    _, pvalue = chi_square_pvalue(counts, _exact_first_two())
    assert pvalue < 1e-6, f"{broken.__name__} was not detected (p={pvalue:.2e})"


def test_greedy_rule_accepts_matching_prefix_then_target_token():
    logits = torch.full((4, 5), -1.0)
    for row, best in enumerate([2, 4, 1, 3]):
        logits[row, best] = 1.0
    sampler = RejectionSampler()
    assert sampler.verify([2, 4, 1], None, logits, GREEDY, None).tokens == [2, 4, 1, 3]  # bonus
    verdict = sampler.verify([2, 0, 1], None, logits, GREEDY, None)
    assert (verdict.accepted, verdict.tokens) == (1, [2, 4])
    verdict = sampler.verify([], None, logits[:1], GREEDY, None)
    assert (verdict.accepted, verdict.tokens) == (0, [2])


def test_identical_draft_is_always_accepted():
    p, _ = _chains()
    params = SamplingParams(temperature=1.0, seed=3)
    gen = params.make_generator()
    for _ in range(50):
        verdict = RejectionSampler().verify([1, 2], p[[0, 1]], torch.log(p[[0, 1, 2]]), params, gen)
        assert verdict.accepted == 2 and len(verdict.tokens) == 3


def test_rows_must_match_proposals():
    with pytest.raises(ValueError, match="rows of target logits"):
        RejectionSampler().verify([1, 2], None, torch.zeros(2, 5), GREEDY, None)
