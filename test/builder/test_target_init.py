"""Drafts made of the target's own first layers (``memspec_build drafts --draft-from-target N``)."""
from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config

from memspec_ros.builder.errors import BuildError
from memspec_ros.builder.target_init import draft_from_target, target_shape
from memspec_ros.core.token_map import TokenMap


def _target(tied: bool) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=96, hidden_size=48, intermediate_size=96, num_hidden_layers=4,
                         num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                         rope_theta=100000.0, tie_word_embeddings=tied)
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("tied", [True, False])
def test_a_draft_of_all_the_targets_layers_is_the_target(tied: bool) -> None:
    """Copied exactly: with every layer the draft computes the target's own logits (rope, GQA, norm, head)."""
    target = _target(tied)
    draft = draft_from_target(target, 4, 64, None)
    ids = torch.randint(0, 96, (1, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(draft(ids).logits, target(ids).logits, atol=1e-5)


def test_a_subset_draft_gets_the_targets_rows_and_a_mean_other_row() -> None:
    target = _target(tied=True)
    token_map = TokenMap.from_ids([5, 7, 11, 0], 96)
    draft = draft_from_target(target, 2, 64, token_map)
    assert draft.config.vocab_size == token_map.draft_vocab_size and draft.config.num_hidden_layers == 2
    rows = draft.model.embed_tokens.weight
    source = target.model.embed_tokens.weight
    assert torch.equal(rows[: token_map.other], source[token_map.draft_to_target])
    outside = [i for i in range(96) if i not in token_map.draft_to_target.tolist()]
    assert torch.allclose(rows[token_map.other], source[outside].mean(0))
    assert torch.equal(draft.model.layers[1].mlp.up_proj.weight, target.model.layers[1].mlp.up_proj.weight)


def test_only_a_llama_target_and_fewer_layers_than_it_has() -> None:
    shape = target_shape(_target(tied=True).config, 2)
    assert (shape.hidden, shape.layers, shape.heads, shape.kv_heads, shape.intermediate) == (48, 2, 6, 2, 96)
    with pytest.raises(BuildError, match="1 to 3 of the target's 4 layers"):
        target_shape(_target(tied=True).config, 4)
    with pytest.raises(BuildError, match="Llama-architecture target"):
        target_shape(Qwen2Config(num_hidden_layers=4), 2)
