"""``dtype: auto``: serve the target in float32 or bfloat16, whichever this machine runs faster.

The answer depends on the CPU: one with native bf16 arithmetic (AVX-512 BF16, AMX, Arm's BF16
extension) runs a bf16 matmul about twice as fast as fp32 (a 135 M target's step: 37-60 ms
against 60-80 ms on the 2-core test machine); one without emulates it and runs it several times
slower. So the node does not guess: it times the target's decoding step and its verification in
both, interleaved, and keeps the faster, preferring float32 unless bfloat16 is clearly faster
(its output is the bf16 target's, which may differ from the fp32 target's after a few tokens).
Whatever it chooses is *the* target: greedy output equals that dtype's own greedy decoding, and
the node logs the choice so a client knows which model it talks to.

Costs: configure holds the fp32 target and a bf16 copy at once while timing (1.5x the fp32
weights: set ``dtype`` explicitly on a machine that cannot afford it), and times at torch's
thread count before ``num_threads: 0`` picks one (bf16's advantage is in the arithmetic, which
does not change with the count). CPU only: on a GPU the node takes bf16 where it is supported.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from .scorer import TargetScorer

CANDIDATES = (torch.float32, torch.bfloat16)
CLEAR_WIN = 0.9
"""bfloat16 must take at most this share of float32's time to be chosen."""


@dataclass(frozen=True)
class DtypeChoice:
    """The chosen dtype and what each candidate measured."""

    dtype: torch.dtype
    round_ms: dict[str, float]
    """Median ms of a decoding step plus a verification, by dtype name."""

    @property
    def name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    def describe(self) -> str:
        cells = ", ".join(f"{n} -> {ms:.1f} ms" for n, ms in self.round_ms.items())
        return f"{self.name} (median target step + verification: {cells})"


def faster(medians: dict[torch.dtype, float]) -> torch.dtype:
    """float32 unless bfloat16 took at most :data:`CLEAR_WIN` of its time: bf16 output may differ from
    fp32's after a few tokens, so a near tie keeps the exact dtype."""
    return torch.bfloat16 if medians[torch.bfloat16] <= CLEAR_WIN * medians[torch.float32] else torch.float32


@torch.inference_mode()
def _round_ms(model: PreTrainedModel, context: list[int], k: int, reps: int) -> float:
    scorer = TargetScorer(model)
    scorer.prefill(context[:-1])
    block = context[-1:] + [context[0]] * k
    times = []
    for i in range(reps + 1):
        t0 = time.perf_counter()
        scorer.score(block[:1])
        scorer.rollback(1)
        scorer.score(block)
        scorer.rollback(len(block))
        if i:  # the first call pays one-time initialisation
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def choose_dtype(model: PreTrainedModel, k: int = 4, *, repeats: int = 2, reps: int = 3) -> tuple[PreTrainedModel,
                                                                                                  DtypeChoice]:
    """Time ``model`` (loaded in float32) and a bfloat16 copy of it; return the faster and the choice.

    The copy exists only while timing (half the float32 model's memory on top of it): a bf16 model
    converted back would have lost the float32 weights' precision.
    """
    vocab = int(model.config.get_text_config().vocab_size)
    context = torch.randint(0, vocab, (64,), generator=torch.Generator().manual_seed(0)).tolist()
    models = {torch.float32: model, torch.bfloat16: copy.deepcopy(model).to(torch.bfloat16)}
    samples: dict[torch.dtype, list[float]] = {d: [] for d in CANDIDATES}
    for _ in range(repeats):  # interleaved: a busy spell of the machine lands on both
        for dtype in CANDIDATES:
            samples[dtype].append(_round_ms(models[dtype], context, k, reps))
    medians = {d: statistics.median(v) for d, v in samples.items()}
    best = faster(medians)
    chosen = models.pop(best)
    models.clear()
    return chosen, DtypeChoice(best, {str(d).removeprefix("torch."): round(ms, 2) for d, ms in medians.items()})
