"""Goodness-of-fit helpers for the distribution tests (scipy is not a dependency)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping


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
