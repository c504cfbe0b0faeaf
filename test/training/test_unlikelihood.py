"""The unlikelihood objective that trained the target out of its greedy loops.

Why: phase three of the target's training rests on three small pieces (the repeat mask, the
batched greedy decoder and the loss); if the mask marked the wrong tokens or the loss pushed
the wrong way, the zoo would be rebuilt silently worse. A tiny randomly initialised Llama (a
real transformers model) keeps these checks fast.
"""
from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from training.unlikelihood import greedy_batch, repeated_ngram_mask, unlikelihood_loss

EOS = 2


def _tiny_model(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                      eos_token_id=EOS, bos_token_id=1, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


def test_mask_marks_every_token_of_a_repeated_4gram_and_nothing_else() -> None:
    rows = torch.tensor([[5, 6, 7, 8, 5, 6, 7, 8, 9, 10],
                         [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]])
    mask = repeated_ngram_mask(rows, EOS)
    assert mask[0].tolist() == [False] * 4 + [True] * 4 + [False] * 2
    assert not mask[1].any()


def test_mask_ignores_tokens_after_eos() -> None:
    row = torch.tensor([[5, 6, 7, 8, EOS, 5, 6, 7, 8, 5]])
    assert not repeated_ngram_mask(row, EOS).any()


def test_greedy_batch_equals_row_by_row_greedy_without_cache() -> None:
    model = _tiny_model()
    prefix = torch.randint(3, 64, (3, 7), generator=torch.Generator().manual_seed(1))
    cont = greedy_batch(model, prefix, 12)
    with torch.no_grad():
        for b in range(prefix.size(0)):
            ids = prefix[b].tolist()
            for _ in range(12):
                ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
            assert cont[b].tolist() == ids[7:]


def test_loss_is_zero_without_repeats_and_descent_lowers_repeated_token_probability() -> None:
    model = _tiny_model(3)
    prefix = torch.tensor([[3, 4, 5, 6]])
    cont = torch.tensor([[10, 11, 12, 13, 10, 11, 12, 13]])
    mask = repeated_ngram_mask(cont, EOS)
    assert unlikelihood_loss(model, prefix, cont, torch.zeros_like(mask)).item() == 0.0

    def repeated_prob() -> float:
        with torch.no_grad():
            logits = model(input_ids=torch.cat([prefix, cont], 1)).logits[0, 3:-1]
        p = logits.softmax(-1).gather(-1, cont[0].unsqueeze(-1)).squeeze(-1)
        return float(p[mask[0]].mean())

    before = repeated_prob()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(20):
        opt.zero_grad()
        unlikelihood_loss(model, prefix, cont, mask).backward()
        opt.step()
    assert repeated_prob() < 0.5 * before
