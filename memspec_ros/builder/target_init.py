"""Drafts that start as the target itself: its embedding, its first layers and its final norm.

Why: a draft trained from random weights on a domain corpus of a few hundred thousand tokens
learns that corpus (the default model set's drafts reached a training loss of 0.1-0.3 nats) but
predicts new text poorly (held-out acceptance 0.15-0.43 against a 135 M target). A draft made of
the target's own first layers, read out through the target's final norm and output rows, starts
from the target's representation of language and of its own answers ("early exit": what the
target would say after ``layers`` of its layers), and distillation only has to teach those few
layers to stand in for the rest. Its width is the target's, so it costs more per step than a
narrow draft (the choice is measured like any other shape: sizing still reports its ratio).

Only for Llama-architecture targets (SmolLM2, Llama, TinyLlama, ...): the node's lean draft
forward is a Llama forward, and a draft copied from another architecture's layers would not be
that architecture any more. With a subset vocabulary (``--draft-vocab``) the draft's rows are the
target's rows of its subset tokens, and its 'other' row is the mean of the rest.
"""
from __future__ import annotations

import copy

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

from memspec_ros.builder.draft_architecture import Shape
from memspec_ros.builder.errors import BuildError
from memspec_ros.core.token_map import TokenMap


def target_shape(config, layers: int) -> Shape:
    """The shape of a draft made of ``layers`` of the target's layers (its width, heads and MLP)."""
    text = config.get_text_config()
    if text.model_type != "llama":
        raise BuildError(f"--draft-from-target needs a Llama-architecture target (its layers become the draft's, "
                         f"which the node runs as a Llama); this target is {text.model_type!r}: train drafts from "
                         "scratch (leave the option out)")
    if not 1 <= layers < text.num_hidden_layers:
        raise BuildError(f"--draft-from-target {layers}: take 1 to {text.num_hidden_layers - 1} of the target's "
                         f"{text.num_hidden_layers} layers")
    return Shape(hidden=text.hidden_size, layers=layers, heads=text.num_attention_heads,
                 kv_heads=text.num_key_value_heads, intermediate=text.intermediate_size,
                 tie_embeddings=bool(getattr(text, "tie_word_embeddings", True)))


@torch.no_grad()
def draft_from_target(target: PreTrainedModel, layers: int, positions: int, token_map: TokenMap | None
                      ) -> LlamaForCausalLM:
    """A ``layers``-layer Llama draft initialised from ``target`` (module docstring), in float32."""
    config: LlamaConfig = copy.deepcopy(target.config.get_text_config())
    config.num_hidden_layers = layers
    config.max_position_embeddings = positions
    if hasattr(config, "layer_types") and config.layer_types:
        config.layer_types = config.layer_types[:layers]
    vocab = token_map.draft_vocab_size if token_map is not None else int(config.vocab_size)
    config.vocab_size = vocab
    config.dtype = "float32"
    draft = LlamaForCausalLM(config).float().eval()
    source = target.model
    for i in range(layers):
        draft.model.layers[i].load_state_dict(source.layers[i].state_dict())
    draft.model.norm.load_state_dict(source.norm.state_dict())
    draft.model.embed_tokens.weight.copy_(_rows(source.embed_tokens.weight, token_map))
    if not config.tie_word_embeddings:
        draft.lm_head.weight.copy_(_rows(target.lm_head.weight, token_map))
    return draft


def _rows(weight: torch.Tensor, token_map: TokenMap | None) -> torch.Tensor:
    """The target's rows of the draft's tokens; the 'other' row is the mean of every row outside the subset."""
    weight = weight.float()
    if token_map is None:
        return weight
    inside = weight[token_map.draft_to_target]
    outside = torch.ones(weight.shape[0], dtype=torch.bool)
    outside[token_map.draft_to_target] = False
    other = weight[outside].mean(0, keepdim=True) if outside.any() else weight.mean(0, keepdim=True)
    return torch.cat([inside, other])
