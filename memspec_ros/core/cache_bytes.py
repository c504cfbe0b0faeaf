"""Bytes a transformers cache holds, whatever its layer kinds.

What a kept dialogue or a draft's cache costs is counted against memory budgets, so every
tensor a layer keeps counts: keys and values of attention layers, and the conv and recurrent
states of linear-attention layers (LFM2's short convolutions), which have no ``keys``.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache


def _layer_tensors(layer: object) -> list[torch.Tensor]:
    tensors = [getattr(layer, "keys", None), getattr(layer, "values", None)]
    for states in ("conv_states", "recurrent_states"):
        tensors.extend((getattr(layer, states, None) or {}).values())
    return [t for t in tensors if isinstance(t, torch.Tensor)]


def cache_nbytes(cache: DynamicCache) -> int:
    """Bytes of every tensor the cache's layers hold now."""
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in _layer_tensors(layer))
