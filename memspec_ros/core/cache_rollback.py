"""Dropping the newest positions of a transformers KV cache exactly, whatever its layer layout.

Speculative decoding feeds proposals and then takes back the rejected ones, so every cache we
keep must be able to forget its newest positions. A full-attention layer (``DynamicLayer``) just
slices them off. A sliding-window layer (Gemma 2, Mistral/Qwen2 with ``use_sliding_window``) keeps
only its last ``sliding_window - 1`` positions, so once the window is full the positions before a
rolled-back block are already gone; transformers' ``DynamicCache.crop`` then raises. The remedy
transformers' own assisted generation uses is *past recording*: a sliding layer keeps everything
it was fed until the next ``crop``, which drops the given count and trims back to the window.
Short-convolution layers (LFM2's ``conv`` layers, a ``LinearAttentionLayer`` holding only conv
states) record the same way: their state is the last ``conv_kernel_size`` inputs.

A *recurrent* state (Mamba's SSM state, gated delta-net layers) folds every token into one
tensor and cannot give a token back. Such a cache is never cropped: :func:`can_drop` says no,
and the caller rebuilds from the token ids it kept (exact, but it re-reads the whole context);
:func:`unrollable_layers` names those layers so a server can refuse the model up front.

So: :func:`new_cache` records the past on every layer that supports it; callers crop after every
block they may take back (``crop(0)`` only trims). :func:`keep_reserve` bounds what a recording
layer holds between crops when blocks arrive one token at a time (a draft); :func:`can_drop`
tells whether dropping ``n`` positions is exact, and when it is not (a long undo past the window)
the caller rebuilds the cache from the token ids it kept (always exact, rarely needed).
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, PretrainedConfig, PreTrainedModel
from transformers.cache_utils import (
    DummyLayer,
    DynamicIndexedLayer,
    DynamicLayer,
    DynamicSlidingWindowLayer,
    LinearAttentionAndFullAttentionLayer,
    LinearAttentionAndSlidingWindowAttentionLayer,
    LinearAttentionCacheLayerMixin,
    LinearAttentionLayer,
)

from memspec_ros.core.errors import ModelConfigError

_KNOWN_LAYERS = (DynamicLayer, DynamicIndexedLayer, DynamicSlidingWindowLayer, DummyLayer, LinearAttentionLayer,
                 LinearAttentionAndFullAttentionLayer, LinearAttentionAndSlidingWindowAttentionLayer)
"""Layer classes whose rollback is understood here (exact types: a subclass may keep more).
``DynamicIndexedLayer`` is full attention plus an indexer its own ``crop`` trims (DeepSeek
V3.2); ``DummyLayer`` holds nothing (MLP-only layers, layers reading a shared cache)."""


def new_cache(config: PretrainedConfig) -> DynamicCache:
    """A ``DynamicCache`` laid out for ``config`` whose sliding and conv layers can be rolled back."""
    cache = DynamicCache(config=config)
    cache.activate_past_recording()
    return cache


def has_windowed_layers(cache: DynamicCache) -> bool:
    """True when some layer forgets old positions (so cropping also has to trim it)."""
    return any(type(layer) is not DynamicLayer for layer in cache.layers)


def _conv_states(layer: LinearAttentionCacheLayerMixin) -> list[int]:
    """Indices of the conv states this layer holds."""
    return [i for i in range(layer.number_of_states) if layer.is_conv_states_initialized[i]]


def _why_unrollable(layer: object) -> str | None:
    """Why ``layer`` (as filled so far) can never take positions back; None if it can."""
    if type(layer) not in _KNOWN_LAYERS:
        return f"a {type(layer).__name__} cache layer, whose rollback is not known"
    if isinstance(layer, LinearAttentionCacheLayerMixin):
        if any(layer.is_recurrent_states_initialized.values()):
            return "a recurrent (state-space or linear-attention) state, which cannot give tokens back"
        if not _conv_states(layer):  # fed, yet empty: the model keeps the state elsewhere (RecurrentGemma)
            return "a recurrent state kept outside the cache, which cannot give tokens back"
        if not layer.record_past:
            return "conv states that do not record their past"
    return None


def unrollable_layers(cache: DynamicCache) -> dict[int, str]:
    """Layer index -> why it cannot take back positions, for a cache some tokens were fed to.

    Linear-attention layers create their states on the first forward, so an empty cache
    tells nothing (and its linear layers read as unrollable): feed a token or two first.
    """
    reasons = {i: _why_unrollable(layer) for i, layer in enumerate(cache.layers)}
    return {i: why for i, why in reasons.items() if why is not None}


def _layer_can_drop(layer: object, n_tokens: int) -> bool:
    if _why_unrollable(layer) is not None:
        return False
    # recorded conv inputs: dropping n must leave the kernel's worth before them
    if isinstance(layer, LinearAttentionCacheLayerMixin) and any(
            layer.conv_states[i].shape[-1] - n_tokens < layer.conv_kernel_size[i] for i in _conv_states(layer)):
        return False
    if isinstance(layer, DynamicSlidingWindowLayer) and layer.is_initialized:
        remaining = layer.get_seq_length() - n_tokens
        if layer.keys.shape[-2] - n_tokens < min(layer.sliding_window - 1, remaining):
            return False
    return True


def can_drop(cache: DynamicCache, n_tokens: int) -> bool:
    """True when ``cache.crop(-n_tokens)`` leaves every layer what a fresh forward would hold.

    A full-attention layer always can. A sliding layer can when, after the drop, it still holds
    the last ``min(sliding_window - 1, remaining)`` positions; a conv layer when it still holds
    the ``conv_kernel_size`` inputs before them. A recurrent state or an unknown layer kind
    cannot: the caller rebuilds instead.
    """
    return all(_layer_can_drop(layer, n_tokens) for layer in cache.layers)


def keep_reserve(cache: DynamicCache, reserve: int) -> None:
    """Trim recording layers to what the next forward needs plus ``reserve`` positions.

    Between crops a recording layer keeps every position it is fed; a draft fed one token at a
    time would grow it to the whole context. Keeping ``reserve`` positions beyond the window
    (the conv kernel) is what lets the next ``crop`` take back up to ``reserve`` of them exactly.
    """
    for layer in cache.layers:
        if isinstance(layer, DynamicSlidingWindowLayer) and layer.is_initialized:
            keep = layer.sliding_window - 1 + reserve
            if layer.keys.shape[-2] > keep:
                layer.keys = layer.keys[:, :, -keep:, :]
                layer.values = layer.values[:, :, -keep:, :]
        if isinstance(layer, LinearAttentionCacheLayerMixin) and layer.record_past:
            for i in _conv_states(layer):
                keep = layer.conv_kernel_size[i] + reserve
                if layer.conv_states[i].shape[-1] > keep:
                    layer.conv_states[i] = layer.conv_states[i][..., -keep:]


def rollback_blockers(model: PreTrainedModel) -> dict[int, str]:
    """Layer index -> why ``model``'s cache cannot take back rejected draft tokens (empty: it can).

    Runs the model on two tokens, because linear-attention layers decide what state they keep
    (conv only, or also a recurrent state) on their first forward; then trims the cache as a
    round does. A model whose cache fails at either is reported under layer -1 with the error.
    """
    cache = new_cache(model.config)
    ids = torch.zeros((1, 2), dtype=torch.long, device=next(model.parameters()).device)
    try:
        with torch.inference_mode():
            model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
        if blockers := unrollable_layers(cache):
            return blockers
        cache.crop(0)
    except Exception as exc:  # any failure means: this cache cannot be rolled back here
        return {-1: f"its cache cannot be trimmed after a forward ({type(exc).__name__}: {exc})"}
    return {}


def require_rollback(model: PreTrainedModel, source: object) -> None:
    """Raise :class:`ModelConfigError` unless ``model`` (loaded from ``source``) can serve as a
    speculative target, naming the first layer that cannot take tokens back and what to do."""
    blockers = rollback_blockers(model)
    if not blockers:
        return
    layer, why = next(iter(blockers.items()))
    where = "" if layer < 0 else f"layer {layer} holds "
    raise ModelConfigError(
        f"{source}: this {model.config.model_type!r} model cannot take back rejected draft tokens: {where}{why}. "
        "Speculative decoding verifies a block of proposals and then drops the rejected ones, so every layer "
        "must be attention (full or sliding-window) or a short convolution (as in LFM2); state-space and "
        "recurrent layers (Mamba, Jamba, RecurrentGemma, gated delta-net) cannot serve as target"
        f"{'' if len(blockers) == 1 else f' ({len(blockers)} such layers)'}")
