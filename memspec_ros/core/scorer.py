"""Target-side scoring: one forward pass verifies all proposed tokens.

The target owns a KV cache for the committed sequence. A round feeds ``[last committed
token] + k proposals`` in a single forward, which yields the target's next-token logits at
all k+1 positions at once (on this CPU that costs about the same as a single-token step,
which is where speculative decoding gets its speed). Entries for rejected proposals are
then cut off with ``DynamicCache.crop`` so the cache again mirrors exactly the committed
sequence (sliding-window layers included: :mod:`memspec_ros.core.cache_rollback`).

Logits are exactly what the model's own forward gives (soft-capping and logit scaling included,
:mod:`memspec_ros.core.output_head`); the final-layer hidden states come with them, and the
runtime's predictor uses them as features. Where the forward is provably just decoder-then-head
(the bundled Llama zoo) the scorer runs those two itself, which spares a hook and output objects
on the hottest path of a round.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from memspec_ros.core.cache_bytes import cache_nbytes
from memspec_ros.core.cache_rollback import can_drop, has_windowed_layers, new_cache
from memspec_ros.core.output_head import causal_lm_forward, has_plain_head


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
    """Holds the target's KV cache for one sequence and scores token blocks against it.

    It also keeps the token ids its cache covers: a cache with sliding-window layers cannot
    always undo a long stretch (:meth:`truncate` after a failed turn), and then it is rebuilt
    from them. So is a cache a forward failed in (an out-of-memory error half-way): some layers
    may hold positions no kept id stands for, and only a rebuild is sure to be exact.
    """

    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self._decoder = model.base_model
        self._head = model.get_output_embeddings() if has_plain_head(model) else None
        self._device = next(model.parameters()).device
        self.cache = new_cache(model.config)
        self._windowed = has_windowed_layers(self.cache)
        self._tokens: list[int] = []
        self._dirty = False
        """A forward raised: the cache may hold more than ``_tokens`` says (rebuilt on truncate)."""

    @property
    def cache_length(self) -> int:
        """Number of token positions the cache covers (a windowed or recurrent layer holds fewer)."""
        return len(self._tokens)

    @property
    def cache_bytes(self) -> int:
        """Bytes the cache holds (keys, values, conv states of every layer): what a kept dialogue costs."""
        return cache_nbytes(self.cache)

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` positions (undo a turn that failed half-way)."""
        if length < 0:
            raise ValueError(f"cannot truncate the cache to a negative length ({length})")
        drop = len(self._tokens) - length
        if drop <= 0 and not self._dirty:
            return
        if not self._dirty and can_drop(self.cache, drop):
            self.cache.crop(-drop)  # this cache's crop takes a negative count
            del self._tokens[length:]
        else:  # a window forgot what the shorter sequence needs, a recurrent state, a failed forward
            kept = self._tokens[:length]
            self.reset()
            self.prefill(kept)

    def reset(self) -> None:
        """Forget the whole sequence."""
        self.cache = new_cache(self.model.config)
        self._tokens = []
        self._dirty = False

    @torch.inference_mode()
    def prefill(self, token_ids: Sequence[int]) -> None:
        """Append ``token_ids`` to the cache without computing logits (prompt ingestion)."""
        if not token_ids:
            return
        ids = torch.tensor([list(token_ids)], dtype=torch.long, device=self._device)
        with self._forward_guard():
            self._decoder(input_ids=ids, cache=self.cache, use_cache=True)  # the cache a full forward fills
        self._tokens.extend(token_ids)
        if self._windowed:
            self.cache.crop(0)  # trim recording sliding layers back to their window

    @torch.inference_mode()
    def score(self, token_ids: Sequence[int]) -> TargetScores:
        """Append ``token_ids`` to the cache and return logits/hidden states for each of them."""
        ids = torch.tensor([list(token_ids)], dtype=torch.long, device=self._device)
        with self._forward_guard():
            if self._head is not None:
                hidden = self._decoder(input_ids=ids, cache=self.cache, use_cache=True).last_hidden_state[0]
                logits = self._head(hidden)
            else:
                logits, hidden = causal_lm_forward(self.model, ids, self.cache)
        self._tokens.extend(token_ids)
        return TargetScores(logits=logits.float(), hidden=hidden)

    @contextmanager
    def _forward_guard(self) -> Iterator[None]:
        """Mark the cache dirty when a forward raises (it may have written some layers)."""
        try:
            yield
        except BaseException:
            self._dirty = True
            raise

    def rollback(self, n_tokens: int) -> None:
        """Drop the last ``n_tokens`` positions from the cache (rejected proposals).

        Exact for any layout as long as they were fed by the latest :meth:`score`, which is how
        the engine uses it. A windowed cache is cropped even for 0 tokens, which trims it. A
        layer that cannot give tokens back (a recurrent state) makes it a rebuild from the kept
        ids: exact, but a forward over the whole context (configure refuses such targets for
        speculation, see :func:`~memspec_ros.core.cache_rollback.rollback_blockers`).
        """
        if n_tokens < 0:
            raise ValueError(f"cannot roll back a negative number of tokens ({n_tokens})")
        if self._dirty or (n_tokens and not can_drop(self.cache, n_tokens)):
            self.truncate(len(self._tokens) - n_tokens)
            return
        if n_tokens or self._windowed:
            self.cache.crop(-n_tokens)
        if n_tokens:
            del self._tokens[-n_tokens:]
