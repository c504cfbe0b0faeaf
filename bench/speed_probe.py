"""How fast the machine runs plain target steps right now: a probe between runs.

The machine's speed moves during a benchmark (other work, clocks, cache state) by 10-25% over
minutes and by up to 19% between runs a minute apart. A few target steps on a fixed prompt are
timed right after the cost model is measured and again between consecutive real runs of the
headline; the median of a session block's probes says how fast the machine was during that
block without running any of the runtime. Each run is simulated at its own verifications'
speed (:func:`bench.drift.verification_speed`), because a probe of a third of a second misses
slow spells of a few seconds inside a run; the probes are the comparison the report prints
beside it ("error at probe speed") and the fallback for a run with no round outside a load.
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
