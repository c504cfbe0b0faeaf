"""Tiny randomly initialised causal LMs of several architectures, built from configs (no download).

They share whatever vocabulary size they are given, so a draft of one architecture can draft
for a target of another. Each stands for a way an architecture departs from the bundled Llama zoo:

* ``qwen2``: q/k/v biases (the functional draft forward must apply them).
* ``gpt2``: learned absolute positions, no rotary, its own config field names (``n_embd``...).
* ``gemma2``: logits soft-capped by ``final_logit_softcapping`` inside the CausalLM forward, and
  sliding-window attention on every other layer; the window is :data:`GEMMA2_WINDOW` tokens, so
  any test sequence longer than that exercises rolling back a full window.
* ``mistral``: a plain-head architecture besides Llama (the scorer's shortcut list).
* ``lfm2``: short-convolution layers beside attention (a ``LinearAttentionLayer`` cache holding
  conv states only), which roll back by past recording like sliding windows.
* ``jamba``: Mamba layers, whose recurrent state cannot give tokens back (refused as target).
"""

from __future__ import annotations

import torch
from transformers import (
    Gemma2Config,
    Gemma2ForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    JambaConfig,
    JambaForCausalLM,
    Lfm2Config,
    Lfm2ForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedModel,
    Qwen2Config,
    Qwen2ForCausalLM,
)

ARCHITECTURES = ("llama", "qwen2", "gpt2", "gemma2")
GEMMA2_WINDOW = 6
GEMMA2_SOFTCAP = 2.0
"""Small enough to reshape the distribution of these random models (their raw logits reach a few
units), large enough that tanh does not saturate into exact ties."""


def tiny_model(arch: str, vocab: int, seed: int, *, hidden: int = 32, layers: int = 2,
               init_range: float | None = None, eos: int | None = 2, max_positions: int = 256) -> PreTrainedModel:
    """A random ``arch`` model with peaked enough logits that greedy ties are practically impossible.

    ``init_range`` defaults to 0.25, and to 0.1 for Gemma 2, which scales its embeddings by
    sqrt(hidden) and ties its head to them: larger raw logits, which the soft cap would squash
    into near-ties and a draft that always agrees.
    """
    if init_range is None:
        init_range = 0.1 if arch == "gemma2" else 0.25
    torch.manual_seed(seed)
    common = dict(vocab_size=vocab, initializer_range=init_range, bos_token_id=1, eos_token_id=eos,
                  pad_token_id=0)
    decoder = dict(hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions)
    if arch == "llama":
        return LlamaForCausalLM(LlamaConfig(**common, **decoder, tie_word_embeddings=False)).eval()
    if arch == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**common, **decoder, tie_word_embeddings=False)).eval()
    if arch == "mistral":
        return MistralForCausalLM(MistralConfig(**common, **decoder, sliding_window=None,
                                                tie_word_embeddings=False)).eval()
    if arch == "gpt2":
        return GPT2LMHeadModel(GPT2Config(**common, n_embd=hidden, n_layer=layers, n_head=4,
                                          n_positions=max_positions)).eval()
    if arch == "gemma2":
        config = Gemma2Config(**common, **decoder, head_dim=hidden // 4, query_pre_attn_scalar=hidden // 4,
                              sliding_window=GEMMA2_WINDOW, final_logit_softcapping=GEMMA2_SOFTCAP)
        return Gemma2ForCausalLM(config).eval()
    if arch == "lfm2":
        config = Lfm2Config(**common, hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                            layer_types=["conv", "full_attention"] * (layers // 2) + ["conv"] * (layers % 2))
        return Lfm2ForCausalLM(config).eval()
    if arch == "jamba":
        config = JambaConfig(**common, **decoder, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                             num_experts=1, mamba_d_state=4)
        return JambaForCausalLM(config).eval()
    raise ValueError(f"unknown architecture {arch!r}")
