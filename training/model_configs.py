"""Architectures of the zoo members (Llama-style, transformers ``LlamaConfig``).

Why these shapes: on a 2-core CPU a forward step at batch 1 is dominated by per-layer
framework overhead, so drafts are *shallow* (2-3 layers) to keep their 1-token step cheap,
while the target is deep enough (8 layers) to be a usable language model and costs >= 8x a
draft step. Draft widths differ so the drafts differ in file size (the runtime's memory
budget must see heterogeneous drafts). ``general`` is deliberately small: it is the
"mediocre everywhere" baseline, not a competitor to the specialists.
"""
from __future__ import annotations

from transformers import LlamaConfig

from memspec_ros.builder.draft_architecture import Shape
from memspec_ros.builder.draft_architecture import llama_config as draft_config
from training.tokenizer import VOCAB_SIZE

__all__ = ["DRAFTS", "MAX_POSITIONS", "TARGET", "Shape", "llama_config"]

MAX_POSITIONS = 1024


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
    return draft_config(shape, vocab_size=VOCAB_SIZE, max_positions=MAX_POSITIONS, bos_token_id=bos_id,
                        eos_token_id=eos_id, pad_token_id=pad_id)
