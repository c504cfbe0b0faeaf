"""Exact greedy acceptance from match vectors (no speculative decoding run needed).

With greedy verification a draft's proposals coincide with the target's greedy tokens up to
the first mismatch. So, given the target's greedy continuation ``y`` of a prompt and one
teacher-forced pass of a draft over ``prompt + y``, ``match[t] = argmax draft(prefix_t) ==
y[t]`` determines every speculative round exactly.

Definition used everywhere in the zoo (k = 4): rounds start at t = 0; a round at t proposes
``p = min(k, n - t)`` tokens, accepts ``a`` = the number of leading ones of ``match[t:t+p]``,
and the target then contributes one token of its own (the correction, or the bonus token
after a full accept), so the next round starts at ``t + a + 1``. This is the engine's rule
(:func:`memspec_ros.core.greedy_match.greedy_rounds`) for a continuation cut from a longer
generation: the engine proposes ``min(k, remaining - 1)`` and ``n - t + 1`` tokens remain at
``t``, since the continuation is not where the generation ends. The acceptance rate is
``sum(a) / sum(p)`` over all rounds of all prompts of a domain (pooled, not averaged).
"""
from __future__ import annotations

from collections.abc import Sequence

from memspec_ros.builder.evaluation import acceptance_rate
from memspec_ros.core.greedy_match import greedy_rounds

__all__ = ["acceptance_rate", "simulate_rounds"]


def simulate_rounds(match: Sequence[bool], k: int = 4) -> tuple[int, int, int]:
    """Return ``(accepted, proposed, rounds)`` for greedy speculation over one sequence."""
    return greedy_rounds(match, k)
