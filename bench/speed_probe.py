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

import statistics
import time
from collections.abc import Sequence

from memspec_ros.core.engine import SpeculativeEngine

PROBE_STEPS = 12


def target_step_s(engine: SpeculativeEngine, prompt_ids: Sequence[int], steps: int = PROBE_STEPS) -> float:
    """Median seconds of one plain target step (after two untimed ones) continuing ``prompt_ids``."""
    room = engine.max_context - len(prompt_ids)
    state = engine.start(list(prompt_ids), max_new_tokens=max(1, min(steps + 2, room)))
    times = []
    for i in range(steps + 2):
        if state.done:
            break
        start = time.perf_counter()
        state.step(None, 1)
        if i >= 2:
            times.append(time.perf_counter() - start)
    return statistics.median(times) if times else 0.0
