"""Incremental forward passes for draft models, each with its own KV cache.

A draft's job is many tiny forward steps (one token each). On a CPU at batch 1 a draft of
a few million parameters spends most of such a step in framework overhead (module calls,
mask construction, output objects, cache bookkeeping), not in arithmetic, and that
overhead is what limits the speed-up of speculative decoding. Two implementations share
one small interface:

* :class:`LlamaDraftForward` - a plain-functional Llama forward over the model's own
  weight tensors (no copies) with growable, preallocated KV buffers: no ``torch.cat``
  per step, O(1) rollback, rotary tables computed once. Used only where it computes exactly
  what the model does (:meth:`LlamaDraftForward.supports`): Llama and Qwen2 (the same decoder
  with q/k/v biases) with default RoPE, full attention everywhere and a plain LM head.
* :class:`HFDraftForward` - the model's own forward (its logit post-processing included)
  with a ``DynamicCache`` that can roll back sliding-window layers; every other architecture.

Draft numerics never affect correctness (the target verifies every token and the draft
probabilities used for rejection sampling are exactly those we sampled from), but they decide
acceptance, so a draft must be what its model is; the test suite checks that both
implementations agree with the model's own forward.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from transformers import LlamaForCausalLM, PreTrainedModel, Qwen2ForCausalLM

from memspec_ros.core.cache_bytes import cache_nbytes
from memspec_ros.core.cache_rollback import can_drop, has_windowed_layers, keep_reserve, new_cache
from memspec_ros.knobs import K


class DraftForward(Protocol):
    """What :class:`~memspec_ros.core.proposer.DraftProposer` needs from a draft model."""

    length: int
    """Number of token positions held in the KV cache."""

    def feed(self, token_ids: list[int]) -> torch.Tensor:
        """Append ``token_ids`` to the cache; return float32 next-token logits ``[V]`` after the last one."""

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` cached positions."""

    def kv(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer ``(keys, values)`` of shape ``[1, kv_heads, length, head_dim]`` (for tests/inspection)."""

    def cache_nbytes(self) -> int:
        """Bytes currently allocated for the KV cache."""


def make_draft_forward(model: PreTrainedModel) -> DraftForward:
    """The fastest implementation that supports ``model``."""
    if LlamaDraftForward.supports(model):
        return LlamaDraftForward(model)
    return HFDraftForward(model)


class HFDraftForward:
    """Generic path: the model's own forward with a transformers ``DynamicCache``.

    A proposer takes back up to k - 1 of its own proposals, each fed in its own step, so
    sliding-window layers keep :data:`ROLLBACK_RESERVE` positions beyond their window; a longer
    undo (rare: a dialogue cut back) rebuilds the cache from the token ids kept here.
    """

    ROLLBACK_RESERVE = int(K.high)
    """Positions a sliding layer keeps beyond its window: the most a round can take back."""

    def __init__(self, model: PreTrainedModel) -> None:
        self._model = model
        self._device = next(model.parameters()).device
        self._cache = new_cache(model.config)
        self._windowed = has_windowed_layers(self._cache)
        self._tokens: list[int] = []
        self.length = 0

    @torch.inference_mode()
    def feed(self, token_ids: list[int]) -> torch.Tensor:
        ids = torch.tensor([token_ids], dtype=torch.long, device=self._device)
        # The model's own forward (its logit post-processing included), last position only.
        logits = self._model(input_ids=ids, cache=self._cache, use_cache=True, logits_to_keep=1).logits
        self.length += len(token_ids)
        self._tokens.extend(token_ids)
        if self._windowed:
            keep_reserve(self._cache, self.ROLLBACK_RESERVE)
        return logits[0, -1].float()

    def truncate(self, length: int) -> None:
        drop = self.length - max(0, length)
        if drop <= 0:
            return
        if length <= 0:
            self._cache = new_cache(self._model.config)
            self._tokens, self.length = [], 0
        elif can_drop(self._cache, drop):
            self._cache.crop(-drop)
            del self._tokens[length:]
            self.length = length
        else:  # a window forgot what the shorter sequence needs, or a recurrent state: rebuild
            kept = self._tokens[:length]
            self.truncate(0)
            self.feed(kept)

    def kv(self) -> list[tuple[torch.Tensor | None, torch.Tensor | None]]:
        """Per layer its keys and values (a sliding layer: its window plus the rollback reserve;
        a conv or shared layer: None)."""
        return [(getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in self._cache.layers]

    def cache_nbytes(self) -> int:
        return cache_nbytes(self._cache)


class LlamaDraftForward:
    """Functional Llama forward (RMSNorm, RoPE, GQA attention, gated MLP) on the model's tensors.

    The weights are referenced, not copied, so weights loaded into the module later are
    picked up and the draft's memory footprint stays that of its weights plus the cache.
    """

    INITIAL_CAPACITY = 128

    SUPPORTED_CLASSES = (LlamaForCausalLM, Qwen2ForCausalLM)
    """Exact classes (a subclass may change the forward) whose decoder this class reproduces:
    Qwen2's differs from Llama's only by q/k/v biases, which ``F.linear`` applies from the
    modules, and optional sliding windows, excluded below."""

    @staticmethod
    def supports(model: PreTrainedModel) -> bool:
        """Llama or Qwen2 with default RoPE, full attention in every layer and a plain LM head."""
        config = model.config
        decoder = model.base_model
        rotary = getattr(decoder, "rotary_emb", None)
        layer_types = getattr(config, "layer_types", None) or ()
        return (
            type(model) in LlamaDraftForward.SUPPORTED_CLASSES
            and getattr(rotary, "rope_type", None) == "default"
            and all(kind == "full_attention" for kind in layer_types)
            and (config.model_type != "llama" or getattr(config, "sliding_window", None) is None)
            and all(hasattr(decoder, name) for name in ("embed_tokens", "layers", "norm"))
        )

    def __init__(self, model: PreTrainedModel) -> None:
        decoder = model.base_model
        config = model.config
        first = decoder.layers[0].self_attn
        self._embed = decoder.embed_tokens.weight
        self._layers = list(decoder.layers)
        self._norm = decoder.norm
        self._head = model.get_output_embeddings()
        self._heads = config.num_attention_heads
        self._kv_heads = config.num_key_value_heads
        self._head_dim = first.head_dim
        self._gqa = self._heads != self._kv_heads
        self._device = self._embed.device
        self._dtype = self._embed.dtype
        positions = torch.arange(config.max_position_embeddings, device=self._device)[None]
        with torch.inference_mode():
            cos, sin = decoder.rotary_emb(self._embed[:1], position_ids=positions)
        self._cos, self._sin = cos[0], sin[0]  # [max_positions, head_dim]
        self._keys: list[torch.Tensor] = []
        self._values: list[torch.Tensor] = []
        self._capacity = 0
        self.length = 0

    # ------------------------------------------------------------------ interface
    @torch.inference_mode()
    def feed(self, token_ids: list[int]) -> torch.Tensor:
        start, count = self.length, len(token_ids)
        end = start + count
        if end > self._cos.shape[0]:
            raise ValueError(f"draft context of {end} tokens exceeds max_position_embeddings {self._cos.shape[0]}")
        self._reserve(end)
        ids = torch.tensor(token_ids, dtype=torch.long, device=self._device)
        hidden = F.embedding(ids, self._embed)[None]  # [1, T, H]
        cos, sin = self._cos[start:end], self._sin[start:end]
        mask = None
        if count > 1:  # causal mask for the new block; a single query may see every key
            mask = torch.ones(count, end, dtype=torch.bool, device=self._device).tril(diagonal=start)
        for index, layer in enumerate(self._layers):
            hidden = hidden + self._attention(layer, index, hidden, cos, sin, start, end, mask)
            hidden = hidden + self._mlp(layer, hidden)
        self.length = end
        last = _rms_norm(hidden[:, -1], self._norm)
        return F.linear(last, self._head.weight, self._head.bias)[0].float()

    def truncate(self, length: int) -> None:
        self.length = min(self.length, max(0, length))  # stale entries are overwritten later

    def kv(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(k[:, :, : self.length], v[:, :, : self.length]) for k, v in zip(self._keys, self._values,
                                                                                 strict=True)]

    def cache_nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self._keys, *self._values))

    # ------------------------------------------------------------------ internals
    def _reserve(self, needed: int) -> None:
        """Grow the KV buffers geometrically (amortised O(1) per token, no per-step cat)."""
        if needed <= self._capacity:
            return
        capacity = max(self.INITIAL_CAPACITY, self._capacity * 2)
        while capacity < needed:
            capacity *= 2
        capacity = min(capacity, self._cos.shape[0])
        shape = (1, self._kv_heads, capacity, self._head_dim)
        grown_k = [torch.empty(shape, dtype=self._dtype, device=self._device) for _ in self._layers]
        grown_v = [torch.empty(shape, dtype=self._dtype, device=self._device) for _ in self._layers]
        for old, new in zip((*self._keys, *self._values), (*grown_k, *grown_v), strict=False):
            new[:, :, : self.length] = old[:, :, : self.length]  # nothing to copy on first use
        self._keys, self._values, self._capacity = grown_k, grown_v, capacity

    def _attention(self, layer, index, hidden, cos, sin, start, end, mask) -> torch.Tensor:
        attn = layer.self_attn
        count = hidden.shape[1]
        x = _rms_norm(hidden, layer.input_layernorm)
        q = F.linear(x, attn.q_proj.weight, attn.q_proj.bias).view(1, count, self._heads, self._head_dim)
        k = F.linear(x, attn.k_proj.weight, attn.k_proj.bias).view(1, count, self._kv_heads, self._head_dim)
        v = F.linear(x, attn.v_proj.weight, attn.v_proj.bias).view(1, count, self._kv_heads, self._head_dim)
        q = _rotate(q.transpose(1, 2), cos, sin)
        self._keys[index][:, :, start:end] = _rotate(k.transpose(1, 2), cos, sin)
        self._values[index][:, :, start:end] = v.transpose(1, 2)
        out = F.scaled_dot_product_attention(
            q,
            self._keys[index][:, :, :end],
            self._values[index][:, :, :end],
            attn_mask=mask,
            scale=attn.scaling,
            enable_gqa=self._gqa,
        )
        out = out.transpose(1, 2).reshape(1, count, self._heads * self._head_dim)
        return F.linear(out, attn.o_proj.weight, attn.o_proj.bias)

    @staticmethod
    def _mlp(layer, hidden: torch.Tensor) -> torch.Tensor:
        mlp = layer.mlp
        x = _rms_norm(hidden, layer.post_attention_layernorm)
        gate = F.linear(x, mlp.gate_proj.weight, mlp.gate_proj.bias)
        up = F.linear(x, mlp.up_proj.weight, mlp.up_proj.bias)
        return F.linear(mlp.act_fn(gate) * up, mlp.down_proj.weight, mlp.down_proj.bias)


def _rms_norm(x: torch.Tensor, norm) -> torch.Tensor:
    """Llama RMSNorm, computed in float32 like the reference implementation."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * x32.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Apply rotary position embedding to ``x`` (``[1, heads, T, head_dim]``)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
