"""Dropping the newest positions of a transformers KV cache exactly, whatever its layer layout.

Speculative decoding feeds proposals and then takes back the rejected ones, so every cache we
keep must be able to forget its newest positions. A full-attention layer (``DynamicLayer``) just
slices them off. A sliding-window layer (Gemma 2, Mistral/Qwen2 with ``use_sliding_window``) keeps
only its last ``sliding_window - 1`` positions, so once the window is full the positions before a
rolled-back block are already gone; transformers' ``DynamicCache.crop`` then raises. The remedy
transformers' own assisted generation uses is *past recording*: a sliding layer keeps everything
it was fed until the next ``crop``, which drops the given count and trims back to the window.

So: :func:`new_cache` records the past on every layer that supports it; callers crop after every
block they may take back (``crop(0)`` only trims). :func:`keep_reserve` bounds what a recording
layer holds between crops when blocks arrive one token at a time (a draft); :func:`can_drop`
tells whether dropping ``n`` positions is exact, and when it is not (a long undo past the window)
the caller rebuilds the cache from the token ids it kept (always exact, rarely needed).
"""

from __future__ import annotations

from transformers import DynamicCache, PretrainedConfig
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer


def new_cache(config: PretrainedConfig) -> DynamicCache:
    """A ``DynamicCache`` laid out for ``config`` whose sliding layers can be rolled back."""
    cache = DynamicCache(config=config)
    cache.activate_past_recording()
    return cache


def has_windowed_layers(cache: DynamicCache) -> bool:
    """True when some layer forgets old positions (so cropping also has to trim it)."""
    return any(type(layer) is not DynamicLayer for layer in cache.layers)


def can_drop(cache: DynamicCache, n_tokens: int) -> bool:
    """True when ``cache.crop(-n_tokens)`` leaves every layer what a fresh forward would hold.

    A full-attention layer always can. A sliding layer can when, after the drop, it still holds
    the last ``min(sliding_window - 1, remaining)`` positions. Any other layer kind (linear
    attention states, unknown layouts) is assumed unable: the caller rebuilds instead.
    """
    for layer in cache.layers:
        if type(layer) is DynamicLayer or not layer.is_initialized:
            continue
        if type(layer) is not DynamicSlidingWindowLayer:
            return False
        remaining = layer.get_seq_length() - n_tokens
        if layer.keys.shape[-2] - n_tokens < min(layer.sliding_window - 1, remaining):
            return False
    return True


def keep_reserve(cache: DynamicCache, reserve: int) -> None:
    """Trim recording sliding layers to ``sliding_window - 1 + reserve`` positions.

    Between crops a recording layer keeps every position it is fed; a draft fed one token at a
    time would grow it to the whole context. Keeping ``reserve`` positions beyond the window is
    what lets the next ``crop`` take back up to ``reserve`` of them exactly.
    """
    for layer in cache.layers:
        if type(layer) is DynamicSlidingWindowLayer and layer.is_initialized:
            keep = layer.sliding_window - 1 + reserve
            if layer.keys.shape[-2] > keep:
                layer.keys = layer.keys[:, :, -keep:, :]
                layer.values = layer.values[:, :, -keep:, :]
