"""Keeping the distillation checkpoint that does best on text the draft never trained on.

Why: a domain corpus of half a million characters is small enough for a draft to memorise.
In docs/own_models.md's languages example, the German and French manual-page drafts beat the
general draft on their training text (0.732 vs 0.696 and 0.784 vs 0.614 acceptance) and lost
to it on held-out pages (0.612 vs 0.684, 0.579 vs 0.603): more training made them worse where
it counts. So every distillation phase scores the draft every so often on the target's own
greedy continuations of prefixes from the domain's *validation* documents
(:func:`memspec_ros.builder.corpora.split_validation`; never the held-out ones ``evaluate``
reports on) and keeps the best weights. A domain draft starts from the general draft and is
scored before its first step, so it ends no worse than the general draft on its validation text.

The score is the share of the target's greedy tokens that the draft, fed the same text, ranks
first: the per-token acceptance of greedy speculative decoding, measured in one forward pass
instead of by decoding.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from transformers import PreTrainedModel

from memspec_ros.builder.continuations import greedy_batch
from memspec_ros.builder.windows import WindowSampler
from memspec_ros.core.token_map import TokenMap, draft_inputs, draft_top_tokens

Check = Callable[[PreTrainedModel], float]
"""Scores a draft's current weights; higher is better."""


def continuation_rows(target: PreTrainedModel, stream: np.ndarray, rows: int, prefix: int, new_tokens: int,
                      seed: int) -> np.ndarray | None:
    """``rows`` prefixes of ``prefix`` tokens from ``stream``, each followed by the target's greedy
    continuation of ``new_tokens``; None when ``stream`` is shorter than one prefix."""
    if len(stream) < prefix + 1:
        return None
    prefixes = WindowSampler({"validation": stream}, {"validation": 1.0}, prefix - 1, rows, seed).next()
    with torch.autocast("cpu", enabled=False):
        continued = greedy_batch(target, prefixes, new_tokens)
    return torch.cat([prefixes, continued], 1).numpy()


class AgreementCheck:
    """Share of the continuation tokens in ``rows`` that a draft predicts as its top-1 token."""

    def __init__(self, rows: np.ndarray, prefix: int, batch: int = 16, token_map: TokenMap | None = None) -> None:
        if rows.ndim != 2 or rows.shape[1] <= prefix:
            raise ValueError(f"validation rows must be (n, > {prefix}) token arrays, got shape {rows.shape}")
        self.rows = torch.from_numpy(rows.astype(np.int64))
        self.prefix = prefix
        self.batch = batch
        self.token_map = token_map
        """The drafts' token map (rows are target ids; a subset draft reads and predicts its own)."""

    @torch.no_grad()
    def __call__(self, model: PreTrainedModel) -> float:
        was_training = model.training
        model.eval()
        hits = total = 0
        with torch.autocast("cpu", enabled=False):
            for part in self.rows.split(self.batch):
                logits = model(input_ids=draft_inputs(part[:, :-1], self.token_map)).logits[:, self.prefix - 1:]
                hits += int((draft_top_tokens(logits, self.token_map) == part[:, self.prefix:]).sum())
                total += logits.shape[0] * logits.shape[1]
        model.train(was_training)
        return hits / total


class BestWeights:
    """The best-scoring weights a training run has offered so far, kept in memory to restore."""

    def __init__(self, check: Check) -> None:
        self.check = check
        self.history: list[tuple[float, float]] = []
        """``(seconds into the run, score)`` of every offer."""
        self.best_score = float("-inf")
        self.best_at = 0.0
        self._state: dict[str, torch.Tensor] | None = None

    def offer(self, model: PreTrainedModel, at_s: float) -> float:
        """Score ``model`` now; keep a copy of its weights if they beat every earlier offer."""
        score = self.check(model)
        self.history.append((at_s, score))
        if score > self.best_score:
            self.best_score, self.best_at = score, at_s
            self._state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return score

    def restore(self, model: PreTrainedModel) -> None:
        """Load the best weights into ``model`` (no-op before any offer)."""
        if self._state is not None:
            model.load_state_dict(self._state)

    def summary(self) -> dict[str, float]:
        """Scores at the start, at the end and at best, and when the best was reached."""
        if not self.history:
            return {}
        return {"validation_start": round(self.history[0][1], 4), "validation_end": round(self.history[-1][1], 4),
                "validation_best": round(self.best_score, 4), "validation_best_at_s": round(self.best_at, 1),
                "validation_checks": len(self.history)}
