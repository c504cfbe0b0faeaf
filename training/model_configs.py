"""Architectures of the zoo members (Llama-style, transformers ``LlamaConfig``).

Why these shapes: on a 2-core CPU a forward step at batch 1 is dominated by per-layer
framework overhead, so drafts are *shallow* (2-3 layers) to keep their 1-token step cheap,
while the target is deep enough (8 layers) to be a usable language model and costs >= 8x a
draft step. Draft widths differ so the drafts differ in file size (the runtime's memory
budget must see heterogeneous drafts). ``general`` is deliberately small: it is the
"mediocre everywhere" baseline, not a competitor to the specialists.
"""
from __future__ import annotations

from dataclasses import dataclass

from transformers import LlamaConfig

from training.tokenizer import VOCAB_SIZE

MAX_POSITIONS = 1024


@dataclass(frozen=True)
class Shape:
    """The few knobs that differ between zoo members."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    tie_embeddings: bool


TARGET = Shape(hidden=384, layers=8, heads=6, kv_heads=6, intermediate=1024, tie_embeddings=False)

DRAFTS: dict[str, Shape] = {
    "robot": Shape(hidden=96, layers=2, heads=3, kv_heads=3, intermediate=256, tie_embeddings=True),
    "math": Shape(hidden=128, layers=2, heads=4, kv_heads=4, intermediate=352, tie_embeddings=True),
    "legal": Shape(hidden=144, layers=2, heads=4, kv_heads=4, intermediate=384, tie_embeddings=True),
    "code": Shape(hidden=176, layers=2, heads=4, kv_heads=4, intermediate=480, tie_embeddings=True),
    "prose": Shape(hidden=192, layers=2, heads=4, kv_heads=4, intermediate=512, tie_embeddings=True),
    "general": Shape(hidden=80, layers=2, heads=4, kv_heads=4, intermediate=224, tie_embeddings=True),
}


def llama_config(shape: Shape, bos_id: int, eos_id: int, pad_id: int) -> LlamaConfig:
    """Build the ``LlamaConfig`` for ``shape`` with the shared vocabulary and special ids."""
    return LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=MAX_POSITIONS,
        rope_theta=10000.0,
        tie_word_embeddings=shape.tie_embeddings,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
