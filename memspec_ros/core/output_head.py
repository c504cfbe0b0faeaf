"""A causal LM's logits exactly as its own forward makes them, plus the hidden states they came from.

Sampling is lossless only with respect to the target's real output distribution, and several
architectures post-process the LM head's output inside their ``*ForCausalLM.forward``: Gemma 2/3
soft-cap it (``final_logit_softcapping``), Cohere multiplies it (``logit_scale``), Granite divides
it (``logits_scaling``). Running ``model.base_model`` and ``get_output_embeddings()`` by hand skips
that, so the engine would sample from another distribution. :func:`causal_lm_forward` therefore
goes through the model's own forward; the final-layer hidden states (the runtime predictor's
features) are caught on their way out of the decoder (``model.get_decoder()``) by a forward
hook, so they are exactly the decoder's ``last_hidden_state`` whatever the architecture. The
decoder, not ``model.base_model``: OPT's forward calls ``model.model.decoder`` directly and
never runs its base model's own forward.

The shortcut (decoder, then head) is kept where it is provably the same computation: classes in
:data:`PLAIN_HEAD_CLASSES`, whose forward is ``lm_head(last_hidden_state)`` and nothing else. It
spares the hook and the output objects on the verify path of the bundled (Llama) zoo, and the
test suite checks it is bit-identical to the model's forward for each listed class.
"""

from __future__ import annotations

import torch
from transformers import (
    GPT2LMHeadModel,
    LlamaForCausalLM,
    MistralForCausalLM,
    PreTrainedModel,
    Qwen2ForCausalLM,
)
from transformers.cache_utils import Cache

from memspec_ros.core.errors import ModelConfigError

PLAIN_HEAD_CLASSES: frozenset[type[PreTrainedModel]] = frozenset(
    {LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, GPT2LMHeadModel}
)
"""Classes whose forward computes ``lm_head(base_model(...).last_hidden_state)`` unchanged (read in
transformers' source; exact classes only, since a subclass may override ``forward``)."""


def has_plain_head(model: PreTrainedModel) -> bool:
    """True when the decoder-then-head shortcut gives exactly the logits ``model(...)`` gives."""
    return type(model) in PLAIN_HEAD_CLASSES


def causal_lm_forward(model: PreTrainedModel, input_ids: torch.Tensor,
                      cache: Cache) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``model``'s own forward over ``input_ids`` (extending ``cache``).

    Returns ``(logits, hidden)`` for batch row 0: the model's logits ``[T, V]`` in the model's
    dtype, and the decoder's final-layer (post-norm) hidden states ``[T, H]``. The hook lives for
    this call only, so a model shared by several decoding states never accumulates hooks.
    (A draft needs no hidden states and calls the model directly.)
    """
    captured: list[torch.Tensor] = []

    def keep_hidden(_module, _args, output) -> None:
        captured.append(output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0])

    handle = model.get_decoder().register_forward_hook(keep_hidden)
    try:
        out = model(input_ids=input_ids, cache=cache, use_cache=True)
    finally:
        handle.remove()
    if not captured:
        raise ModelConfigError(f"{type(model).__name__}: its forward never ran the module get_decoder() "
                               "names, so its final hidden states cannot be read; this architecture is "
                               "not supported as a target")
    return out.logits[0], captured[-1][0]
