"""Goodness-of-fit helpers for the distribution tests (scipy is not a dependency).

The distribution tests look at the first two generated tokens of a model with a vocabulary of
a few tokens: their joint distribution is small enough for a sharp chi-square test with a few
thousand seeded generations (:func:`sample_two_tokens`), and its exact value comes from direct
target forwards (:func:`exact_two_tokens`).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence

import torch

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.sampling import SamplingParams, logits_to_probs


def exact_two_tokens(target, prompt: Sequence[int], params: SamplingParams, vocab: int) -> dict:
    """P(first two tokens = (a, b)) under ``target``'s own forward with ``params``' processing."""
    with torch.no_grad():
        first = logits_to_probs(target(torch.tensor([list(prompt)])).logits[0, -1], params)
        seconds = [logits_to_probs(target(torch.tensor([[*prompt, a]])).logits[0, -1], params)
                   for a in range(vocab)]
    return {(a, b): float(first[a] * seconds[a][b]) for a in range(vocab) for b in range(vocab)}


def sample_two_tokens(engine: SpeculativeEngine, draft: DraftProposer, prompt: Sequence[int],
                      params: SamplingParams, n: int) -> Counter:
    """Counts of the first two tokens over ``n`` generations seeded ``params.seed + i`` (k=2)."""
    counts: Counter = Counter()
    for i in range(n):
        seeded = dataclasses.replace(params, seed=params.seed + i)
        session = engine.generate(list(prompt), draft, k=2, max_new_tokens=2, params=seeded)
        counts[tuple(session.output_ids)] += 1
    return counts


def chi_square_pvalue(observed: Counter, expected_probs: Mapping[Hashable, float]) -> tuple[float, float]:
    """Pearson chi-square test of ``observed`` counts against ``expected_probs``.

    Cells with an expected count below 5 are pooled into one cell (the textbook validity
    condition). Returns ``(statistic, p_value)``; the p-value uses the Wilson-Hilferty
    normal approximation of the chi-square distribution, accurate to a few percent for
    the degrees of freedom used here, which is plenty for thresholds like 1e-3.
    """
    n = sum(observed.values())
    cells = set(expected_probs) | set(observed)
    big, pooled_obs, pooled_exp = [], 0, 0.0
    for cell in cells:
        exp = n * expected_probs.get(cell, 0.0)
        if exp >= 5:
            big.append((observed.get(cell, 0), exp))
        else:
            pooled_obs += observed.get(cell, 0)
            pooled_exp += exp
    if pooled_obs or pooled_exp:
        big.append((pooled_obs, max(pooled_exp, 1e-12)))
    statistic = sum((o - e) ** 2 / e for o, e in big)
    dof = max(len(big) - 1, 1)
    z = ((statistic / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))
    return statistic, 0.5 * math.erfc(z / math.sqrt(2))


def total_variation(observed: Counter, expected_probs: Mapping[Hashable, float]) -> float:
    """Total-variation distance between the empirical and the expected distribution."""
    n = sum(observed.values())
    cells = set(expected_probs) | set(observed)
    return 0.5 * sum(abs(observed.get(c, 0) / n - expected_probs.get(c, 0.0)) for c in cells)
