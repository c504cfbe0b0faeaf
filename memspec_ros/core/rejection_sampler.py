"""Deciding which proposed tokens to keep.

Two rules, both lossless:

* **Greedy** (temperature 0): accept proposals while they equal the target's argmax, then
  append the target's argmax at the first mismatch (or the bonus token after k accepts).
  The output is token-for-token the target's greedy output.
* **Speculative rejection sampling** (Leviathan et al. 2023; Chen et al. 2023): accept
  proposal x_i with probability min(1, p_i(x)/q_i(x)); on the first rejection sample a
  replacement from norm(max(0, p_i - q_i)); after k accepts sample a bonus token from
  p_k. Every emitted token is then distributed exactly as the target's (processed)
  distribution p, whatever the draft.

The probabilistic rule is split into :meth:`RejectionSampler.accept_probability` and
:meth:`RejectionSampler.residual` so tests can substitute deliberately broken variants and
show that the distribution test catches them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from memspec_ros.core.greedy_match import accepted_prefix
from memspec_ros.core.sampling import SamplingParams, logits_to_probs


@dataclass(frozen=True)
class Verdict:
    """Result of verifying one proposal.

    Attributes:
        accepted: how many proposed tokens were kept (a prefix of the proposal).
        tokens: the tokens to commit: the accepted prefix plus one token chosen by the
            target (replacement or bonus), so ``len(tokens) == accepted + 1``.
    """

    accepted: int
    tokens: list[int]


class RejectionSampler:
    """Applies the greedy or the stochastic acceptance rule, as the sampling params say."""

    def verify(
        self,
        proposed: Sequence[int],
        draft_probs: torch.Tensor | None,
        target_logits: torch.Tensor,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> Verdict:
        """Verify ``proposed`` (k tokens) against ``target_logits`` (``[k+1, V]``).

        ``draft_probs`` (``[k, V]``, the distributions the proposals were sampled from) is
        required for sampling and ignored for greedy decoding.
        """
        if target_logits.shape[0] != len(proposed) + 1:
            raise ValueError(
                f"need {len(proposed) + 1} rows of target logits for {len(proposed)} proposals, "
                f"got {target_logits.shape[0]}"
            )
        if params.greedy:
            return self.greedy(proposed, target_logits)
        return self.stochastic(proposed, draft_probs, logits_to_probs(target_logits, params), generator)

    @staticmethod
    def greedy(proposed: Sequence[int], target_logits: torch.Tensor) -> Verdict:
        """Accept the longest prefix that matches the target's argmax, then add its next argmax."""
        best = target_logits.argmax(dim=-1).tolist()
        accepted = accepted_prefix(proposed, best)
        return Verdict(accepted, [*proposed[:accepted], best[accepted]])

    def stochastic(
        self,
        proposed: Sequence[int],
        draft_probs: torch.Tensor | None,
        target_probs: torch.Tensor,
        generator: torch.Generator | None,
    ) -> Verdict:
        """Speculative rejection sampling over target probabilities ``[k+1, V]``."""
        k = len(proposed)
        if k == 0:
            return Verdict(0, [_sample(target_probs[0], generator)])
        if draft_probs is None or draft_probs.shape[0] != k:
            raise ValueError("stochastic verification needs the draft's [k, V] probabilities")
        rows = torch.arange(k)
        ids = torch.tensor(list(proposed), dtype=torch.long)
        p_x = target_probs[rows, ids]
        q_x = draft_probs[rows, ids].float()
        uniforms = torch.rand(k, generator=generator, dtype=torch.float32)
        keep = (uniforms < self.accept_probability(p_x, q_x)).tolist()
        accepted = keep.index(False) if False in keep else k
        if accepted == k:
            extra = _sample(target_probs[k], generator)
        else:
            extra = _sample(self.residual(target_probs[accepted], draft_probs[accepted].float()), generator)
        return Verdict(accepted, [*proposed[:accepted], extra])

    @staticmethod
    def accept_probability(p_x: torch.Tensor, q_x: torch.Tensor) -> torch.Tensor:
        """min(1, p(x)/q(x)) for each proposed token x (q(x) > 0: x was sampled from q)."""
        return torch.clamp(p_x / q_x.clamp_min(torch.finfo(q_x.dtype).tiny), max=1.0)

    @staticmethod
    def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """max(0, p - q), unnormalised; falls back to p if it is all zero (only when p == q)."""
        residual = torch.clamp(p - q, min=0.0)
        return residual if float(residual.sum()) > 0.0 else p


def _sample(weights: torch.Tensor, generator: torch.Generator | None) -> int:
    """Draw one index proportionally to non-negative ``weights`` (need not sum to 1)."""
    return int(torch.multinomial(weights, 1, generator=generator).item())
