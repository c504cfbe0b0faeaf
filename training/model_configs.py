"""Architecture of the zoo's target (Llama-style, transformers ``LlamaConfig``).

Why this shape: on a 2-core CPU a forward step at batch 1 is dominated by per-layer framework
overhead; the target is deep enough (8 layers) to be a usable language model, and its
verification then costs many times a shallow draft's step (``memspec_build drafts`` measures
the ratio and sizes the drafts by it).
"""
from __future__ import annotations

from transformers import LlamaConfig

from memspec_ros.builder.draft_architecture import Shape
from memspec_ros.builder.draft_architecture import llama_config as shaped_config
from training.tokenizer import VOCAB_SIZE

__all__ = ["MAX_POSITIONS", "TARGET", "Shape", "llama_config"]

MAX_POSITIONS = 1024


TARGET = Shape(hidden=384, layers=8, heads=6, kv_heads=6, intermediate=1024, tie_embeddings=False)


def llama_config(shape: Shape, bos_id: int, eos_id: int, pad_id: int) -> LlamaConfig:
    """Build the ``LlamaConfig`` for ``shape`` with the shared vocabulary and special ids."""
    return shaped_config(shape, vocab_size=VOCAB_SIZE, max_positions=MAX_POSITIONS, bos_token_id=bos_id,
                         eos_token_id=eos_id, pad_token_id=pad_id)
