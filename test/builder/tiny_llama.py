"""A tiny random Llama for builder unit tests: small enough to train for a second on a CPU."""
from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def tiny_llama(seed: int, hidden: int = 32) -> LlamaForCausalLM:
    """A 2-layer Llama over a 64-token vocabulary, seeded, in eval mode."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=64, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=128, eos_token_id=2, bos_token_id=1, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()
