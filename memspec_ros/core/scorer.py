"""Target-side scoring: one forward pass verifies all proposed tokens.

The target owns a KV cache for the committed sequence. A round feeds ``[last committed
token] + k proposals`` in a single forward, which yields the target's next-token logits at
all k+1 positions at once (on this CPU that costs about the same as a single-token step,
which is where speculative decoding gets its speed). Entries for rejected proposals are
then cut off with ``DynamicCache.crop`` so the cache again mirrors exactly the committed
sequence.

The final-layer hidden states are returned too: we run the decoder and the LM head
separately, so they come for free, and the runtime's predictor uses them as features.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel


@dataclass(frozen=True)
class TargetScores:
    """Output of one scoring pass over ``n`` input tokens.

    Attributes:
        logits: ``[n, V]`` float32; row i is the target's next-token logits after input i.
        hidden: ``[n, H]`` final-layer (post-norm) hidden states for the same positions.
    """

    logits: torch.Tensor
    hidden: torch.Tensor


class TargetScorer:
    """Holds the target's KV cache for one sequence and scores token blocks against it."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self._decoder = model.base_model
        self._head = model.get_output_embeddings()
        self._device = next(model.parameters()).device
        self.cache = DynamicCache(config=model.config)

    @property
    def cache_length(self) -> int:
        """Number of token positions currently held in the KV cache."""
        return self.cache.get_seq_length()

    @property
    def cache_bytes(self) -> int:
        """Bytes the KV cache holds (keys and values of every layer): what a kept dialogue costs."""
        total = 0
        for layer in getattr(self.cache, "layers", ()):
            for tensor in (getattr(layer, "keys", None), getattr(layer, "values", None)):
                if isinstance(tensor, torch.Tensor):
                    total += tensor.numel() * tensor.element_size()
        return total

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` positions (undo a turn that failed half-way)."""
        if length < 0:
            raise ValueError(f"cannot truncate the cache to a negative length ({length})")
        if self.cache_length > length:
            self.cache.crop(length - self.cache_length)  # this cache's crop takes a negative count

    def reset(self) -> None:
        """Forget the whole sequence."""
        self.cache = DynamicCache(config=self.model.config)

    @torch.inference_mode()
    def prefill(self, token_ids: Sequence[int]) -> None:
        """Append ``token_ids`` to the cache without computing logits (prompt ingestion)."""
        if not token_ids:
            return
        ids = torch.tensor([list(token_ids)], dtype=torch.long, device=self._device)
        self._decoder(input_ids=ids, cache=self.cache, use_cache=True)

    @torch.inference_mode()
    def score(self, token_ids: Sequence[int]) -> TargetScores:
        """Append ``token_ids`` to the cache and return logits/hidden states for each of them."""
        ids = torch.tensor([list(token_ids)], dtype=torch.long, device=self._device)
        hidden = self._decoder(input_ids=ids, cache=self.cache, use_cache=True).last_hidden_state[0]
        logits = self._head(hidden).float()
        return TargetScores(logits=logits, hidden=hidden)

    def rollback(self, n_tokens: int) -> None:
        """Drop the last ``n_tokens`` positions from the cache (rejected proposals)."""
        if n_tokens < 0:
            raise ValueError(f"cannot roll back a negative number of tokens ({n_tokens})")
        if n_tokens:
            self.cache.crop(-n_tokens)
