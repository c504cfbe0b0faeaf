"""bf16 autocast for training, only on a CPU where it is faster: measured once per process.

CPUs with native bf16 matrix instructions (AVX-512 BF16, AMX) train the drafts nearly 2x faster
under bf16 autocast (measured for the zoo on such a machine). Without them PyTorch emulates
bf16 and the same step is far slower: 6.0 s against 0.4 s in fp32 for a 160x2 draft step
(16 x 128 tokens) on an AVX2-only AMD EPYC. Vendors name the features differently and torch
exposes them only privately, so the choice is measured: one matmul of a training step's size
in each precision. Master weights and saved weights stay fp32 either way.
"""

from __future__ import annotations

import functools
import time

import torch

MATMUL_SIZE = 512
BF16_MUST_BE_UNDER = 0.8
"""bf16 must be clearly faster on the matmul: autocast adds casts around every operator."""


def _best_matmul_s(dtype: torch.dtype) -> float:
    # Not torch.randn: training seeds the global generator before the first (cached) call.
    a = torch.full((MATMUL_SIZE, MATMUL_SIZE), 0.5, dtype=dtype)
    b = torch.full((MATMUL_SIZE, MATMUL_SIZE), 0.25, dtype=dtype)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return min(times)


def bf16_is_clearly_faster(bf16_s: float, fp32_s: float) -> bool:
    """The rule applied to the two matmul timings."""
    return bf16_s < BF16_MUST_BE_UNDER * fp32_s


@functools.cache
def bf16_autocast_pays() -> bool:
    """True when this CPU multiplies bf16 clearly faster than fp32 (printed once)."""
    fp32, bf16 = _best_matmul_s(torch.float32), _best_matmul_s(torch.bfloat16)
    pays = bf16_is_clearly_faster(bf16, fp32)
    print(f"[train] bf16 autocast {'on' if pays else 'off'}: a {MATMUL_SIZE}^3 matmul takes "
          f"{bf16 * 1e3:.2f} ms in bf16 against {fp32 * 1e3:.2f} ms in fp32 on this CPU", flush=True)
    return pays


def training_autocast() -> torch.autocast:
    """The autocast context a training or distillation step runs in on this CPU."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16_autocast_pays())
