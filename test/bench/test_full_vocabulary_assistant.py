"""transformers' assisted generation gets an exact full-vocabulary copy of a subset draft.

Its ``generate(assistant_model=...)`` needs the target's vocabulary, so the benchmark expands a
subset draft (:func:`bench.testbed._full_vocabulary`): outside the subset the 'other' row and a
logit 1e4 lower. Its greedy choice must be the subset draft's at every position, or the peer
would measure another draft than the one the node runs.
"""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from bench.testbed import _full_vocabulary
from memspec_ros.core.token_map import TokenMap


def test_the_expansion_proposes_exactly_what_the_subset_draft_proposes() -> None:
    vocab = 96
    token_map = TokenMap.from_ids(range(3, vocab, 3), vocab)
    torch.manual_seed(0)
    draft = LlamaForCausalLM(LlamaConfig(vocab_size=token_map.draft_vocab_size, hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         tie_word_embeddings=False)).eval()
    full = _full_vocabulary(draft, token_map)
    ids = torch.randint(0, vocab, (2, 24))
    with torch.no_grad():
        subset_choice = token_map.top_tokens(draft(input_ids=token_map.draft_inputs(ids)).logits)
        full_logits = full(input_ids=ids).logits
    assert full.config.vocab_size == full_logits.shape[-1] == vocab
    assert torch.equal(full_logits.argmax(-1), subset_choice)
    outside = token_map.target_to_draft == token_map.other
    assert (full_logits[..., outside].max() < full_logits.max(-1).values.min() - 1e3).item()
    assert draft.config.vocab_size == token_map.draft_vocab_size  # the node's copy is untouched
