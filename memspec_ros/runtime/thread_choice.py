"""``num_threads: 0`` (auto) for a whole model set: which draft to time the rounds with.

:func:`memspec_ros.core.thread_tuning.fastest_thread_count` times rounds of one engine and one
proposer; which proposer stands for a catalogue, within the memory budget, is a runtime
question. The node's configure and the benchmark's headline both call :func:`choose_threads`,
so the benchmark measures exactly the thread count a node on the same machine would run with.
"""

from __future__ import annotations

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.thread_tuning import ThreadChoice, fastest_thread_count

from .catalogue import Budget, Catalogue
from .loader import Materializer

PROBE_PROMPT = "The robot looked at the table and said"
"""Any text works: only the time of the rounds counts, not what they decode."""


def choose_threads(engine: SpeculativeEngine, catalogue: Catalogue, budget: Budget, materialize: Materializer,
                   k: int) -> ThreadChoice:
    """Time speculative rounds with a draft of the catalogue at each thread count; torch is left at the fastest.

    The general draft if the budget admits it, else the smallest draft it admits, else target-only
    rounds: the measurement must not hold more draft memory than the node is allowed to. The draft
    is materialised for the measurement only and dropped before the runtime loads its working set.
    """
    fitting = [s for s in catalogue if budget.admits([s.size_bytes])]
    spec = next((s for s in fitting if s.domain in ("general", "mixed")),
                min(fitting, key=lambda s: s.size_bytes) if fitting else None)
    proposer = materialize(spec, [bytearray(f.read_bytes()) for f in spec.weight_files]) if spec else None
    return fastest_thread_count(engine, proposer, engine.encode(PROBE_PROMPT), k=k)
