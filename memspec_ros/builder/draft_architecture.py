"""The drafts' architecture: small Llama-style models, whatever the target's architecture.

Why Llama for every draft: the node's proposer has a lean functional forward for Llama
(:class:`memspec_ros.core.draft_forward.LlamaDraftForward`, preallocated KV buffers, no
per-step framework overhead), and on a CPU at batch 1 that overhead, not arithmetic, is what
a draft step costs. A draft only has to share the target's token ids and logit width, not
its architecture. Drafts are shallow (2-4 layers) for the same reason: per-layer overhead
dominates a small model's step; tied embeddings halve the vocabulary's share of its size.
"""
from __future__ import annotations

from dataclasses import dataclass

from transformers import LlamaConfig


@dataclass(frozen=True)
class Shape:
    """The knobs that set a Llama model's size."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    tie_embeddings: bool = True

    @property
    def label(self) -> str:
        return f"hidden {self.hidden} x {self.layers} layers"

    def parameters(self, vocab: int) -> int:
        """Parameter count with a ``vocab``-row embedding (and head unless tied)."""
        head_dim = self.hidden // self.heads
        attention = self.hidden * head_dim * (2 * self.heads + 2 * self.kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        embeddings = vocab * self.hidden * (1 if self.tie_embeddings else 2)
        return embeddings + self.layers * (attention + mlp + 2 * self.hidden) + self.hidden


def llama_config(shape: Shape, *, vocab_size: int, max_positions: int, bos_token_id: int | None,
                 eos_token_id: int | list[int] | None, pad_token_id: int | None) -> LlamaConfig:
    """The ``LlamaConfig`` of ``shape`` with a given vocabulary (logit width) and special ids."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=max_positions,
        rope_theta=10000.0,
        tie_word_embeddings=shape.tie_embeddings,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )


def parse_shape(text: str) -> Shape:
    """``HIDDENxLAYERS`` (e.g. ``192x2``) as a :class:`Shape` with 32-wide heads."""
    try:
        hidden_text, layers_text = text.lower().split("x")
        hidden, layers = int(hidden_text), int(layers_text)
    except ValueError:
        raise ValueError(f"draft shape {text!r} must be HIDDENxLAYERS, e.g. 192x2") from None
    if hidden < 16 or hidden % 16 or not 1 <= layers <= 16:
        raise ValueError(f"draft shape {text!r}: hidden must be a multiple of 16 (>= 16), layers 1-16")
    heads = max(1, hidden // 32)
    while hidden % heads:
        heads -= 1
    return Shape(hidden=hidden, layers=layers, heads=heads, kv_heads=heads,
                 intermediate=(hidden * 8 // 3 + 15) // 16 * 16)
