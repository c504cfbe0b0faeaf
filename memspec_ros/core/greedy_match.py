"""The greedy acceptance rule, defined once.

With greedy verification a round accepts the draft's proposals up to the first one that
differs from the target's argmax and then emits one token of the target's own. Everything that
reasons about greedy rounds uses these functions: the engine's sampler (real verification), the
runtime's counterfactual scoring, the exact traces the simulator replays, the predictor's
training labels and the zoo's acceptance figures. When they each wrote the loop themselves the
copies drifted (one used a different proposal length), so a simulated round could differ from
the round the engine would run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def leading_matches(matches: Iterable[bool]) -> int:
    """How many leading entries are true: the accepted prefix of a greedy round."""
    n = 0
    for m in matches:
        if not m:
            break
        n += 1
    return n


def accepted_prefix(proposed: Sequence[int], reference: Sequence[int]) -> int:
    """Proposed tokens accepted against the target's tokens (leading equal tokens)."""
    return leading_matches(p == r for p, r in zip(proposed, reference, strict=False))


def proposal_length(k: int, remaining: int) -> int:
    """Tokens a draft proposes when the turn may still emit ``remaining`` tokens.

    A round emits accepted + 1 tokens, so proposing more than ``remaining - 1`` is wasted work.
    """
    return max(0, min(k, remaining - 1))


def greedy_rounds(match: Sequence[bool], k: int, *, start: int = 0, end: int | None = None,
                  limit: int | None = None) -> tuple[int, int, int]:
    """``(accepted, proposed, rounds)`` of greedy rounds over a match vector.

    ``match[t]`` says whether the draft's argmax at position ``t`` equals the target's token.
    Rounds start at ``start`` and continue while they start before ``end`` (default: the end
    of ``match``); a round at ``t`` proposes :func:`proposal_length` ``(k, limit - t)`` tokens
    (``limit``: the turn's token limit; default ``len(match) + 1``, a vector cut from a longer
    generation, where the last position can still be proposed), accepts the leading matches
    and moves to ``t + accepted + 1``.
    """
    end = len(match) if end is None else end
    limit = len(match) + 1 if limit is None else limit
    t, accepted, proposed, rounds = start, 0, 0, 0
    while t < end:
        p = proposal_length(k, limit - t)
        if p == 0:
            break
        a = leading_matches(match[t:t + p])
        accepted += a
        proposed += p
        rounds += 1
        t += a + 1
    return accepted, proposed, rounds
