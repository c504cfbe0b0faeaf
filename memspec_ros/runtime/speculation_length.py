"""How many tokens a draft should propose this round: dynamic speculation length.

A round with a draft costs ``k`` draft steps plus one verification and emits the accepted
prefix plus one token; a round without costs one target step and emits one. With a forecast
acceptance that is high, long proposals pay; with a middling one, a short proposal still beats
no draft at all (on the CPU we measure on, a draft step is a tenth of a verification), where a
fixed ``k`` would make the round slower than target-only and the policy would drop the draft.

Model: each proposed token is accepted with probability ``alpha`` while the previous ones
were (the usual i.i.d. model of speculative decoding), so a round of ``k`` emits
``(1 - alpha^(k+1)) / (1 - alpha)`` tokens on average. Forecasts and measurements are in
*acceptance rate* units (accepted / proposed at the configured ``k``); :func:`per_token_acceptance`
converts one into the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


def expected_emitted(alpha: float, k: int) -> float:
    """Mean tokens a round of ``k`` proposals emits (accepted prefix + the target's own token)."""
    if k <= 0:
        return 1.0
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def per_token_acceptance(rate: float, k: int) -> float:
    """The per-token ``alpha`` whose rounds of ``k`` accept ``rate * k`` tokens on average.

    ``rate`` is accepted/proposed (what the tracker measures and the predictor forecasts); the
    mean accepted prefix is ``expected_emitted(alpha, k) - 1``, increasing in alpha, so a few
    bisection steps invert it.
    """
    rate = min(max(rate, 0.0), 1.0)
    if k <= 0 or rate in (0.0, 1.0):
        return rate
    target = rate * k
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if expected_emitted(mid, k) - 1.0 < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class LengthChoice:
    """The best proposal length and its expected speed."""

    k: int
    tokens_per_s: float


def best_length(alpha: float, draft_step_s: float, verify_s: float, max_k: int) -> LengthChoice:
    """The ``k`` in ``1..max_k`` with the highest expected tokens per second (ties: shorter)."""
    best = LengthChoice(1, expected_emitted(alpha, 1) / (draft_step_s + verify_s))
    for k in range(2, max_k + 1):
        rate = expected_emitted(alpha, k) / (k * draft_step_s + verify_s)
        if rate > best.tokens_per_s * (1.0 + 1e-9):
            best = LengthChoice(k, rate)
    return best


def rate_at_k(rounds: Iterable[tuple[int, int]], k: int) -> float | None:
    """The acceptance rate at proposal length ``k`` implied by ``(proposed, accepted)`` rounds.

    Rounds of different lengths cannot be pooled as accepted/proposed: a round of 1 accepting
    its token and a round of 4 accepting 1 measure the same per-token acceptance very
    differently. Under the i.i.d. model each accepted token is a success and each round that
    stopped short a failure, so ``alpha = successes / (successes + failures)`` (the maximum
    likelihood estimate), which is then expressed at ``k``. None: no proposals.
    """
    successes = failures = 0
    for proposed, accepted in rounds:
        if proposed <= 0:
            continue
        successes += accepted
        failures += accepted < proposed
    if successes + failures == 0:
        return None
    alpha = successes / (successes + failures)
    return (expected_emitted(alpha, k) - 1.0) / k
