"""Greedy output compared across batchings in low precision: equal, or apart only at a tie.

Speculative decoding scores k+1 positions in one verification pass; plain decoding scores one
position per step. In exact arithmetic both give the same logits. In float32 they differ in the
last bits, which almost never changes an argmax (the default model set: 15 of 15 held-out turns
identical). In bfloat16 a logit of 20 has a resolution of 0.125, and the rounding of every layer
adds up: the same positions scored one token at a time, in blocks of five (a verification) and in
one forward over the whole context give margins between the top-5 tokens that differ by 0.0625
logits at the median, 0.375 at the 99th percentile and 0.875 at most, 8 bf16 steps at the
logits' magnitude (``python -m bench.tie_noise``, the default model set, 9600 token pairs at 240
positions). Two tokens that close are a tie that either batching may break its own way
(measured on the default model set: 11 of 15 turns identical, the other 4 apart at margins of 0,
0.125, 0.125 and 0 logits). So a low-precision output is checked for what can be guaranteed: it
equals the reference up to its first difference, and at that difference the target itself
(scored once more) rates both tokens within a tie of each other: ``TIE_STEPS`` steps, twice the
largest batching difference measured. After such a tie both continuations are the target's own
greedy output from different but equally valid choices; they are not compared further.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

RESOLUTION_BITS = {torch.bfloat16: 8, torch.float16: 11, torch.float32: 24}
"""Significand bits (with the implicit one) of each dtype."""
TIE_STEPS = {torch.bfloat16: 16, torch.float16: 16, torch.float32: 2}
"""How many representable steps (at the logits' magnitude) apart two logits may be and still count
as tied: twice the largest difference between batchings measured in bfloat16 (8 steps); float32's
differences are in the last bits."""


@dataclass(frozen=True)
class Divergence:
    """Where two greedy outputs first differ, and whether the target calls it a tie there."""

    index: int
    margin: float
    """The target's logit of the reference's token minus that of the other output's token."""
    tolerance: float
    """Largest margin counted as a tie (``TIE_STEPS`` representable steps at the logits' magnitude)."""
    reference_token: int = -1
    output_token: int = -1

    @property
    def is_tie(self) -> bool:
        return abs(self.margin) <= self.tolerance


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first position where ``a`` and ``b`` differ (a length difference counts); None: equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def resolution(magnitude: float, dtype: torch.dtype) -> float:
    """The spacing of representable values of ``dtype`` at ``magnitude`` (one "step")."""
    exponent = math.floor(math.log2(max(abs(magnitude), 1e-30)))
    return 2.0 ** (exponent - (RESOLUTION_BITS.get(dtype, 24) - 1))


@torch.inference_mode()
def divergence(model: PreTrainedModel, context: Sequence[int], reference: Sequence[int], output: Sequence[int]
               ) -> Divergence | None:
    """How ``output`` departs from ``reference`` (both greedy continuations of ``context``); None: equal.

    One forward of ``model`` (in its own dtype) over ``context + reference[:i]`` scores the
    position where they first differ. One being a prefix of the other (with the same token limit
    and end-of-sequence tokens greedy runs cannot do that) is never a tie.
    """
    i = first_difference(reference, output)
    if i is None:
        return None
    if i >= len(reference) or i >= len(output):
        return Divergence(index=i, margin=math.inf, tolerance=0.0)
    ids = torch.tensor([[*context, *reference[:i]]], device=next(model.parameters()).device)
    logits = model(input_ids=ids).logits[0, -1].float()
    a, b = float(logits[reference[i]]), float(logits[output[i]])
    dtype = next(model.parameters()).dtype
    step = resolution(max(abs(a), abs(b)), dtype)
    return Divergence(index=i, margin=a - b, tolerance=TIE_STEPS.get(dtype, 2) * step,
                      reference_token=int(reference[i]), output_token=int(output[i]))
