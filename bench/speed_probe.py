"""How fast the machine runs plain target steps right now: the speed reference of target-only decoding.

The drift of :mod:`bench.drift` is measured on the runtime's speculative rounds, and those also
carry what the runtime itself costs them: draft and target weights evicting each other from the
CPU caches, the loader's reads, and at two threads on two cores the decoding threads fighting
the loader (the 2-thread runs measured 2.3x the isolated round time, while plain target-only
decoding got faster). Charging that to modelled target-only decoding, which runs none of it,
under-predicted it by 43%. Target-only's model is therefore rescaled by this probe instead: a
few target steps timed right after the cost model is measured and again before every session
block of the headline, so what carries over is the machine's speed and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.thread_tuning import median_round_s

PROBE_STEPS = 12


def target_step_s(engine: SpeculativeEngine, prompt_ids: Sequence[int], steps: int = PROBE_STEPS) -> float:
    """Median seconds of one plain target step (after two untimed ones) continuing ``prompt_ids``."""
    median = median_round_s(engine, None, prompt_ids, k=1, rounds=steps)
    return median if median != float("inf") else 0.0
