"""How fast the machine runs plain target steps right now: the yardstick of the machine's speed.

The machine's speed moves during a benchmark (other work, clocks, cache state) by 10-25% over
minutes and by up to 19% between runs a minute apart. A few target steps on a fixed prompt,
timed right after the cost model is measured and again between consecutive real runs of the
headline, say how fast the machine was during each session block without running any of the
runtime: the median of the block's probes (one probe of a third of a second can land on a
hiccup; the mean of the two probes around each run put one policy's runs 10% slower than they
ran). :mod:`bench.drift` divides each run's measured rounds by that speed; target-only
decoding, which runs none of the runtime, is simulated at that speed alone (charged the
runtime's drift, it was once under-predicted by 43%: at two threads the loader's OpenMP team
then slowed every runtime round, :mod:`memspec_ros.core.serial_thread`).
"""

from __future__ import annotations

from collections.abc import Sequence

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.thread_tuning import median_round_s

PROBE_STEPS = 24


def target_step_s(engine: SpeculativeEngine, prompt_ids: Sequence[int], steps: int = PROBE_STEPS) -> float:
    """Median seconds of one plain target step (after two untimed ones) continuing ``prompt_ids``."""
    median = median_round_s(engine, None, prompt_ids, k=1, rounds=steps)
    return median if median != float("inf") else 0.0
