"""A draft without a model: propose what followed the last few tokens where they appeared before.

Robot dialogue repeats itself: object and place names, commands, code the user just pasted, the
robot's own earlier answers. Prompt-lookup decoding (transformers' ``prompt_lookup_num_tokens``,
llama.cpp's n-gram speculation) exploits that with no weights at all: find the latest earlier
occurrence of the context's last ``n`` tokens and propose the tokens that followed it. Longer
matches are tried first (``max_n`` down to ``min_n``): a longer match is more specific.

It needs no memory budget, no load and almost no compute, so it can sit in the draft pool as a
member that is always resident (:mod:`memspec_ros.runtime.ngram_member`). It implements the
same ``propose`` as :class:`~memspec_ros.core.proposer.DraftProposer`, so the engine verifies it
like any draft. Exactness: greedy verification only needs the tokens; sampling needs the
distribution each token was drawn from, and a deterministic proposal is a one-hot distribution.
Rejection sampling with a one-hot ``q`` accepts token ``x`` with probability ``p(x)`` and
otherwise samples from ``p`` without ``x``: the target's distribution exactly.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Sequence

import torch

from memspec_ros.core.proposer import Proposal
from memspec_ros.core.sampling import SamplingParams

NGRAM_NAME = "ngram"
"""The name the n-gram member has in the pool, statistics, topics and reports."""

DEFAULT_MIN_N = 2
DEFAULT_MAX_N = 4
SEARCH_WINDOW = 4096
"""Tokens of context searched (the latest ones): bounds a round's cost on a long dialogue."""


def lookup(context: Sequence[int], k: int, min_n: int = DEFAULT_MIN_N, max_n: int = DEFAULT_MAX_N,
           window: int = SEARCH_WINDOW) -> list[int]:
    """Up to ``k`` tokens that followed the latest earlier occurrence of the context's last n-gram.

    The longest ``n`` in ``[min_n, max_n]`` with an earlier occurrence wins; among its
    occurrences the latest one (the most recent use of those words). Empty when none recurs.

    It runs before every decoding round, so it must cost little beside a target step (a 5 ms step
    on a small target): the ids become one bytes object (4 bytes per token) searched backwards
    with ``bytes.rfind``, a C loop, about 10 us on 300 tokens where a numpy window scan took 100.
    """
    if k <= 0 or len(context) < min_n + 1:
        return []
    ids = array("i", context[-window:])
    data = ids.tobytes()
    length = len(ids)
    for n in range(min(max_n, length - 1), min_n - 1, -1):
        pattern = data[(length - n) * _WIDTH:]
        # Earlier occurrences: an occurrence needs a follower, so it lies within ids[:-1] (which
        # also leaves out the suffix itself); a hit between two tokens' bytes is no occurrence.
        end = (length - 1) * _WIDTH
        while (at := data.rfind(pattern, 0, end)) >= 0:
            if at % _WIDTH == 0:
                start = at // _WIDTH + n
                return ids[start:start + k].tolist()
            end = at + len(pattern) - 1
    return []


_WIDTH = array("i").itemsize
"""Bytes per token id in :func:`lookup`'s search (a C int: ids are below 2**31)."""


class NgramProposer:
    """Proposes from the context alone (prompt lookup); the engine verifies it as any draft."""

    def __init__(self, vocab_size: int, *, min_n: int = DEFAULT_MIN_N, max_n: int = DEFAULT_MAX_N,
                 name: str = NGRAM_NAME) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(f"n-gram sizes need 1 <= min_n <= max_n, got min_n={min_n}, max_n={max_n}")
        self.name = name
        self.vocab_size = int(vocab_size)
        self.min_n, self.max_n = int(min_n), int(max_n)

    def cache_nbytes(self) -> int:
        """It holds no cache: 0 bytes (the pool's budget never counts it)."""
        return 0

    def reset(self) -> None:
        """Nothing to forget: every proposal reads the context it is given."""

    def propose(self, context: Sequence[int], k: int, params: SamplingParams,
                generator: torch.Generator | None = None) -> Proposal:
        """Up to ``k`` tokens; a one-hot distribution per token when sampling (the draw is certain)."""
        if not context:
            raise ValueError("cannot propose without context")
        start = time.perf_counter()
        tokens = lookup(context, k, self.min_n, self.max_n)
        probs = None
        if tokens and not params.greedy:
            probs = torch.zeros(len(tokens), self.vocab_size)
            probs[torch.arange(len(tokens)), torch.tensor(tokens)] = 1.0
        return Proposal(tokens=tokens, draft_probs=probs, seconds=time.perf_counter() - start)
