"""``dtype: auto``: the target timed in float32 and bfloat16, the faster kept, the fp32 weights intact."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from memspec_ros.core.dtype_choice import choose_dtype, faster


def _tiny() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128)
    return LlamaForCausalLM(config).eval()


def test_auto_returns_the_model_in_the_measured_faster_dtype() -> None:
    model = _tiny()
    before = model.model.embed_tokens.weight.detach().clone()
    chosen, choice = choose_dtype(model, 4, repeats=2, reps=2)
    assert set(choice.round_ms) == {"float32", "bfloat16"} and all(ms > 0 for ms in choice.round_ms.values())
    assert next(chosen.parameters()).dtype == choice.dtype
    assert choice.name in choice.describe() and "ms" in choice.describe()
    assert choice.dtype == faster({torch.float32: choice.round_ms["float32"],
                                   torch.bfloat16: choice.round_ms["bfloat16"]})
    if choice.dtype == torch.float32:  # timing a bf16 copy must not have rounded the fp32 weights
        assert torch.equal(chosen.model.embed_tokens.weight, before)


def test_float32_is_kept_unless_bfloat16_is_clearly_faster() -> None:
    """bf16 output may differ from fp32's after a few tokens, so a near tie keeps the exact dtype."""
    assert faster({torch.float32: 10.0, torch.bfloat16: 9.5}) == torch.float32
    assert faster({torch.float32: 10.0, torch.bfloat16: 5.0}) == torch.bfloat16
