"""Sequence-level unlikelihood training against greedy repetition loops.

Why: after 12.8M tokens of next-token training the target still fell into loops under greedy
decoding (``import sys`` twenty times, ``able to be able to be``): maximum likelihood
alone makes a small model put too much mass on continuing a pattern it has just produced, and
more of the same data barely moved it. Sequence-level unlikelihood training (Welleck et al.,
2019, "Neural Text Generation with Unlikelihood Training") attacks that failure directly: the
model decodes greedily from training-text prefixes, and every token of its continuation that
belongs to a 4-gram it already produced in that continuation gets the loss
``-log(1 - p(token))``, which lowers exactly the probabilities that keep a loop going.
Steps alternate with ordinary next-token steps so the model stays anchored to the data.

Real text repeats 4-grams rarely (a 64-token held-out window has a median distinct-4gram ratio of
0.95-1.0 in every domain), so the penalty falls almost only on degenerate output. Prefixes come
from training text only; held-out prompts are never seen.
"""
from __future__ import annotations

import torch
from transformers import LlamaForCausalLM

from memspec_ros.builder.continuations import greedy_batch
from memspec_ros.builder.training_loop import lm_loss
from memspec_ros.builder.windows import WindowSampler

__all__ = ["UnlikelihoodObjective", "greedy_batch", "repeated_ngram_mask", "unlikelihood_loss"]

NGRAM = 4
PREFIX_TOKENS = 32
CONTINUATION_TOKENS = 64


def repeated_ngram_mask(tokens: torch.Tensor, eos_id: int, n: int = NGRAM) -> torch.Tensor:
    """``(B, T)`` bool: True for each token of an n-gram already seen earlier in its row.

    Tokens after a row's first EOS are ignored (the continuation ended there)."""
    mask = torch.zeros(tokens.shape, dtype=torch.bool)
    for b, row in enumerate(tokens.tolist()):
        end = row.index(eos_id) if eos_id in row else len(row)
        seen: set[tuple[int, ...]] = set()
        for i in range(end - n + 1):
            gram = tuple(row[i:i + n])
            if gram in seen:
                mask[b, i:i + n] = True
            seen.add(gram)
    return mask


def unlikelihood_loss(model: LlamaForCausalLM, prefix: torch.Tensor, cont: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
    """``-log(1 - p)`` of the masked continuation tokens, averaged over all continuation
    tokens (a continuation without repeats contributes zero)."""
    ids = torch.cat([prefix, cont], dim=1)
    logits = model(input_ids=ids[:, :-1]).logits[:, prefix.size(1) - 1:].float()
    p = logits.softmax(-1).gather(-1, cont.unsqueeze(-1)).squeeze(-1)
    penalty = -torch.log((1.0 - p).clamp_min(1e-5))
    return (penalty * mask).sum() / mask.numel()


class UnlikelihoodObjective:
    """Alternates next-token steps (even) with sequence-level unlikelihood steps (odd)."""

    def __init__(self, data: WindowSampler, prefixes: WindowSampler, eos_id: int,
                 weight: float = 1.0, log_every: int = 50) -> None:
        self.data, self.prefixes, self.eos_id = data, prefixes, eos_id
        self.weight, self.log_every = weight, log_every
        self.repeat_fraction: float | None = None
        """EMA of the share of continuation tokens inside repeated 4-grams (the loop rate)."""

    def __call__(self, model: LlamaForCausalLM, step: int) -> tuple[torch.Tensor, int]:
        if step % 2 == 0:
            batch = self.data.next()
            return lm_loss(model, batch), batch.numel() - batch.size(0)
        prefix = self.prefixes.next()
        with torch.autocast("cpu", enabled=False):  # greedy as the exported fp32 model decodes
            cont = greedy_batch(model, prefix, CONTINUATION_TOKENS)
        mask = repeated_ngram_mask(cont, self.eos_id)
        frac = float(mask.float().mean())
        self.repeat_fraction = frac if self.repeat_fraction is None \
            else 0.95 * self.repeat_fraction + 0.05 * frac
        if step % self.log_every == 1:
            print(f"[unlikelihood] step {step} repeated-4gram share of greedy continuations "
                  f"{self.repeat_fraction:.3f}", flush=True)
        return self.weight * unlikelihood_loss(model, prefix, cont, mask), cont.numel()
