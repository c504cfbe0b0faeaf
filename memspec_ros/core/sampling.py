"""Sampling parameters and the logits -> probabilities transform.

The same transform is applied to draft and target logits: speculative rejection sampling is
exact with respect to the *processed* target distribution, so both sides must see the
identical temperature / top-k / top-p processing. Temperature 0 means greedy decoding, which uses
a separate, deterministic acceptance rule and needs no probabilities at all.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, replace

import torch

from memspec_ros.core.errors import InvalidRequestError

MIN_TEMPERATURE = 1e-3
"""Smallest sampling temperature (other than 0 = greedy). Dividing float32 logits by a
smaller one overflows to inf (1e-40 is a float32 denormal) and the softmax turns into NaN
halfway through a generation; a request that close to greedy should ask for greedy."""

MAX_SEED = 2**63 - 1
"""Largest seed (``int64`` on the wire, what ``torch.Generator.manual_seed`` accepts)."""

MAX_TOP_K = 2**31 - 1
"""Largest ``top_k`` (anything at or above the vocabulary size keeps every token)."""


@dataclass(frozen=True)
class SamplingParams:
    """How tokens are chosen.

    Attributes:
        temperature: 0 selects greedy decoding; otherwise at least :data:`MIN_TEMPERATURE`,
            dividing logits before the softmax.
        top_p: nucleus mass kept (0 < top_p <= 1); 1 keeps the whole distribution.
        seed: seeds the session's ``torch.Generator`` so sampled outputs are reproducible;
            ``None`` draws a fresh seed (:meth:`with_drawn_seed` draws it visibly, so that a
            server can report it; a replay with it repeats the sample when the same drafts
            propose, since the draft choices decide how the generator is consumed).
        top_k: keep only the ``top_k`` most likely tokens before top-p (ties with the k-th
            are kept, as transformers' ``TopKLogitsWarper`` does); 0 keeps them all.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    top_k: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.temperature, (int, float)) or not math.isfinite(self.temperature):
            raise InvalidRequestError(f"temperature must be a finite number, got {self.temperature!r}")
        if self.temperature < 0:
            raise InvalidRequestError(
                f"temperature must be >= 0 (0 = greedy), got {self.temperature}"
            )
        if 0 < self.temperature < MIN_TEMPERATURE:
            raise InvalidRequestError(
                f"temperature {self.temperature:g} is below the minimum {MIN_TEMPERATURE:g}: "
                "use 0 for greedy decoding"
            )
        if not isinstance(self.top_p, (int, float)) or not (0.0 < self.top_p <= 1.0):
            raise InvalidRequestError(f"top_p must lie in (0, 1], got {self.top_p!r}")
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED
        ):
            raise InvalidRequestError(f"seed must be an int in [0, 2^63 - 1] or None, got {self.seed!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or not 0 <= self.top_k <= MAX_TOP_K:
            raise InvalidRequestError(f"top_k must be an int in [0, {MAX_TOP_K}] (0 = off), got {self.top_k!r}")

    @property
    def greedy(self) -> bool:
        """True when decoding is deterministic argmax (temperature 0)."""
        return self.temperature == 0.0

    def with_drawn_seed(self) -> SamplingParams:
        """These settings with a concrete seed: ``seed`` if set, else a fresh random one.

        The drawn seed is never 0, because 0 on the wire means "draw one" and replaying a
        reported seed must reproduce the sample.
        """
        if self.seed is not None:
            return self
        return replace(self, seed=1 + secrets.randbelow(MAX_SEED))

    def make_generator(self, device: torch.device | str = "cpu") -> torch.Generator:
        """Return a generator seeded from ``seed`` (or from fresh entropy when it is None)."""
        generator = torch.Generator(device=device)
        if self.seed is None:
            generator.seed()
        else:
            generator.manual_seed(self.seed)
        return generator


GREEDY = SamplingParams()


def logits_to_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Turn logits ``[..., V]`` into a probability distribution after temperature, top-k, top-p.

    Computed in float32 whatever the model dtype, so draft and target probabilities are
    comparable. Top-k keeps the tokens at least as likely as the k-th most likely one; top-p
    then keeps the smallest set of most likely tokens whose (renormalised) mass reaches
    ``top_p`` (always at least the most likely token) and renormalises: the order and
    semantics of transformers' ``TopKLogitsWarper`` followed by ``TopPLogitsWarper``.
    """
    if params.greedy:
        raise InvalidRequestError("logits_to_probs is undefined for temperature 0 (greedy)")
    probs = torch.softmax(logits.float() / params.temperature, dim=-1)
    if 0 < params.top_k < probs.shape[-1]:
        kth = torch.topk(probs, params.top_k, dim=-1).values[..., -1:]
        probs = probs.masked_fill(probs < kth, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if params.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(mass_before >= params.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs
