"""Draft-side proposing: one small model guesses the next k tokens.

A :class:`DraftProposer` wraps one draft model and its own KV cache. It remembers which
token ids its cache covers, so before each proposal it only has to process the context
tokens it has not yet seen: normally the one token the target just committed, but after a
draft switch, a few target-only rounds, or a new dialogue turn, a longer suffix that it
processes in one forward ("catch-up"). That is what lets the runtime change drafts between
any two rounds without touching the target's cache; the catch-up cost is reported so the
price of switching is visible.

The hot path is deliberately lean: no generate(), no logits processors, and the forward
steps go through :mod:`memspec_ros.core.draft_forward`, which for Llama drafts is a plain
functional forward with preallocated KV buffers. On a CPU at batch 1 a tiny draft's step
is mostly framework overhead, and that overhead, not the target, limits the speed-up.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from memspec_ros.core.draft_forward import DraftForward, make_draft_forward
from memspec_ros.core.position_limit import context_bound
from memspec_ros.core.sampling import SamplingParams, logits_to_probs
from memspec_ros.core.token_map import TokenMap


@dataclass(frozen=True)
class Proposal:
    """Tokens a draft proposes for one round.

    Attributes:
        tokens: the proposed token ids (possibly fewer than requested, possibly none).
        draft_probs: ``[len(tokens), V]`` distributions the tokens were sampled from, over
            the target's vocabulary (sampling mode), or ``None`` in greedy mode where they are
            not needed.
        seconds: wall time of the whole proposal, catch-up included.
        catchup_tokens: context tokens processed beyond the ordinary one new token.
        catchup_seconds: wall time of the catch-up forward (0.0 without catch-up).
    """

    tokens: list[int]
    draft_probs: torch.Tensor | None = None
    seconds: float = 0.0
    catchup_tokens: int = 0
    catchup_seconds: float = 0.0

    @staticmethod
    def empty() -> Proposal:
        """A proposal of zero tokens (a target-only round)."""
        return Proposal(tokens=[])


class DraftProposer:
    """Wraps one draft model with a KV cache that follows the current sequence.

    With a ``token_map`` the draft predicts a subset of the target's vocabulary
    (:mod:`memspec_ros.core.token_map`): context ids are translated on the way in, proposals
    on the way out, and proposal distributions are scattered into the target's vocabulary.
    ``seen_tokens`` and proposals are always target ids.
    """

    def __init__(self, model: PreTrainedModel, name: str, token_map: TokenMap | None = None) -> None:
        self.model = model.eval()
        self.name = name
        self.token_map = token_map
        if token_map is not None and int(model.config.vocab_size) != token_map.draft_vocab_size:
            raise ValueError(f"draft {name!r} has {model.config.vocab_size} logits but its token map "
                             f"{token_map.draft_vocab_size} (subset and 'other'): they were not made together")
        self.vocab_size: int = token_map.target_vocab_size if token_map else int(model.config.vocab_size)
        """The target-side vocabulary its proposals' distributions cover."""
        # A model without a position limit (ALiBi) stops where the memory budget counted its KV cache.
        self.max_positions: int = context_bound(model.config)
        self._forward: DraftForward = make_draft_forward(model)
        self._seen: list[int] = []  # token ids whose keys/values are cached, in order
        # After a proposal the cache holds context + proposals[:-1]; if every proposal is
        # accepted the next context adds the last proposal plus the target's bonus token.
        # Processing those two is ordinary work, not catch-up.
        self._expected_next_len: int | None = None
        self._last_proposed: int | None = None

    # ------------------------------------------------------------------ public API
    @property
    def forward_impl(self) -> DraftForward:
        """The forward implementation in use (its ``kv()`` exposes the cache for inspection)."""
        return self._forward

    @property
    def seen_tokens(self) -> list[int]:
        """Token ids whose keys/values are in the cache, in order (a copy)."""
        return list(self._seen)

    def cache_nbytes(self) -> int:
        """Bytes held by this draft's KV cache (part of its memory footprint)."""
        return self._forward.cache_nbytes()

    def reset(self) -> None:
        """Forget the sequence (frees the cache memory)."""
        self._forward = make_draft_forward(self.model)
        self._seen = []
        self._expected_next_len = None
        self._last_proposed = None

    @torch.inference_mode()
    def propose(
        self,
        context: Sequence[int],
        k: int,
        params: SamplingParams,
        generator: torch.Generator | None = None,
    ) -> Proposal:
        """Propose up to ``k`` tokens continuing ``context`` (the committed token ids).

        Greedy params give argmax tokens; otherwise tokens are sampled (with ``generator``)
        from the processed draft distribution, which is returned for rejection sampling.
        """
        if not context:
            raise ValueError("cannot propose without context")
        k = min(k, self.max_positions - len(context))
        if k <= 0:
            return Proposal.empty()
        start = time.perf_counter()
        suffix, catchup_tokens = self._sync(context)
        logits = self._feed(suffix)
        catchup_seconds = time.perf_counter() - start if catchup_tokens else 0.0

        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        mapped = self.token_map
        for i in range(k):
            if mapped is not None:
                logits = logits[:mapped.other]  # 'other' is never proposed
            if params.greedy:
                token = int(logits.argmax().item())
            else:
                probs = logits_to_probs(logits, params)
                token = int(torch.multinomial(probs, 1, generator=generator).item())
                rows.append(mapped.scatter(probs) if mapped is not None else probs)
            if mapped is not None:
                token = mapped.to_target(token)
            tokens.append(token)
            if i + 1 < k:
                logits = self._feed([token])
        self._expected_next_len = len(context) + k
        self._last_proposed = tokens[-1]
        return Proposal(
            tokens=tokens,
            draft_probs=torch.stack(rows) if rows else None,
            seconds=time.perf_counter() - start,
            catchup_tokens=catchup_tokens,
            catchup_seconds=catchup_seconds,
        )

    # ------------------------------------------------------------------ internals
    def _sync(self, context: Sequence[int]) -> tuple[list[int], int]:
        """Trim the cache to its longest prefix shared with ``context``; return what to feed.

        At least the last context token is always fed, because its logits are needed.
        Returns the suffix and how many of its tokens count as catch-up.
        """
        seen = self._seen
        n_seen = len(seen)
        if n_seen < len(context) and list(context[:n_seen]) == seen:
            common = n_seen
        else:
            common = 0
            for a, b in zip(seen, context, strict=False):
                if a != b:
                    break
                common += 1
            common = min(common, len(context) - 1)
        if common < n_seen:
            self._forward.truncate(common)
            del seen[common:]
        suffix = list(context[common:])
        # Ordinary per-round work is the newest token, plus, when the draft's own last
        # (never fed) proposal was accepted, that proposal. Anything beyond is catch-up.
        ordinary = 1
        expected = self._expected_next_len
        if (
            expected is not None
            and common == expected - 1
            and len(context) > expected
            and context[expected - 1] == self._last_proposed
        ):
            ordinary = 2
        return suffix, max(0, len(suffix) - ordinary)

    def _feed(self, token_ids: list[int]) -> torch.Tensor:
        """Run ``token_ids`` (target ids) through the draft, extending the cache; return
        last-position logits (over the draft's vocabulary)."""
        logits = self._forward.feed(self.token_map.to_draft(token_ids) if self.token_map else token_ids)
        self._seen.extend(token_ids)
        return logits
