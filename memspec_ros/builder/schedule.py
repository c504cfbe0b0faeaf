"""Wall-clock learning-rate schedule.

The zoo is trained under a fixed *time* budget (the machine is shared, step speed varies),
so warmup and cosine decay are functions of elapsed time, not of a step count that would
have to be guessed in advance.
"""
from __future__ import annotations

import math


def lr_at(progress: float, peak: float, warmup: float = 0.03, floor: float = 0.1) -> float:
    """Learning rate at ``progress`` in [0, 1] of the budget: linear warmup, cosine to floor."""
    if progress < warmup:
        return peak * max(progress / warmup, 0.01)
    p = min(1.0, (progress - warmup) / (1.0 - warmup))
    return peak * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * p)))
