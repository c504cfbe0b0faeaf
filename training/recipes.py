"""Training budgets and data mixes of the zoo's target (the numbers that define it).

The target takes about three hours on an idle 2-core CPU (~34 + ~76 + ~70 min): its quality
bounds every draft's acceptance and the product's answers. Its mix is weighted toward the hard
domains (code, prose, legal), where a weak target degenerates into loops; robot and math are
regular enough to need little data. The drafts and the predictor are not trained here:
``make zoo`` builds them with ``memspec_build``, as a user builds theirs (docs/build.md).
"""
from __future__ import annotations

import os
from typing import NamedTuple

TIME_SCALE = float(os.environ.get("ZOO_TIME_SCALE", "1.0"))
"""Multiplies every budget; only smoke runs set it."""

TARGET_SECONDS = 2040.0 * TIME_SCALE
TARGET_LR = 1.5e-3
TARGET_BATCH = 8
TARGET_SEQ = 256
TARGET_MIX: dict[str, float] = {"code": 0.30, "prose": 0.25, "legal": 0.20, "math": 0.12,
                                "robot": 0.13}

TARGET_EXTEND_STEPS = max(1, round(5000 * TIME_SCALE))
"""Second phase of the target: a warm restart from the first phase's weights with a fresh,
lower cosine cycle. 2.6M tokens (phase one) left the target looping on code, legal and prose
prompts; this phase adds ~10M tokens. A *step* budget, unlike phase one's wall-clock one, so a
busy machine makes it slower rather than weaker."""
TARGET_EXTEND_LR = 6e-4


class PolishCycle(NamedTuple):
    """One cosine cycle of the target's third phase."""

    steps: int
    lr: float
    """Peak learning rate."""
    loop_mix: dict[str, float]
    """Where the unlikelihood steps' greedy-loop prefixes come from. Only domains whose
    held-out prompts looped: robot and math text is templated (repeated 4-grams are correct
    there) and never looped."""


TARGET_POLISH_CYCLES: tuple[PolishCycle, ...] = (
    PolishCycle(max(2, round(2000 * TIME_SCALE)), 3e-4, {"code": 0.4, "prose": 0.3, "legal": 0.3}),
    PolishCycle(max(2, round(600 * TIME_SCALE)), 1.5e-4, {"code": 0.4, "prose": 0.3, "legal": 0.3}),
    PolishCycle(max(2, round(1000 * TIME_SCALE)), 1.5e-4, {"code": 0.6, "prose": 0.2, "legal": 0.2}),
)
"""Third phase (``target_polish`` stage): cosine cycles, each a warm restart from the previous
one, of next-token steps on the mix with the extra train-only stdlib code alternating with
sequence-level unlikelihood steps on the target's own greedy continuations
(``training/unlikelihood.py``). After phase two the target looped on 9/24 held-out code, 3/24
prose and 2/24 legal prompts; after the first cycle on 1/24 code prompts, and the second,
shorter and gentler cycle did not clear that one (a list of repeated strings), hence a third
whose loop prefixes lean toward code. Step budgets, like phase two."""
TARGET_POLISH_MIX: dict[str, float] = {"code": 0.30, "prose": 0.25, "legal": 0.20,
                                       "math": 0.12, "robot": 0.13}
"""The same mix as before; the code share now draws from the train split plus the extra code."""
UNLIKELIHOOD_BATCH = 8
