"""``num_threads: 0`` (auto) for a whole model set: time what the node will run, then keep the fastest.

Timing bare engine rounds was not enough: on the 2-core test machine two threads timed 11-26%
faster per bare round, yet inside the runtime the same rounds took twice as long at two threads
and MemSpec fell to 0.7x target-only. The cause was the loader thread's first materialisation
giving it an OpenMP team of its own, after which every team's idle workers sleep between
operators (:mod:`memspec_ros.core.serial_thread`, now applied to the loader); whatever else
the runtime adds around a round is machine-specific too. So auto times rounds the way the node
runs them: a :class:`DraftRuntime` over the model set, with the
static policy on one draft, its loader thread running, at each candidate count. The node's
configure and the benchmark's headline both call :func:`choose_threads`, so the benchmark
measures exactly the thread count a node on the same machine would run with.
"""

from __future__ import annotations

import time

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.thread_tuning import ThreadChoice, fastest_thread_count, pick_fastest

from .catalogue import Budget, Catalogue
from .loader import Materializer
from .policies import make_policy
from .runtime import DraftRuntime, RuntimeConfig

PROBE_PROMPT = "The robot looked at the table and said"
"""Any text works: only the time of the rounds counts, not what they decode."""
PROBE_TOKENS = 24
"""Tokens per timed turn (10-15 rounds with a useful draft, 24 without): four timed turns keep
configure within a few seconds on a small model, and within a minute for the 135 M default target
on a busy 2-core machine (40 tokens took 55 s there, at a load average of 3.5)."""


def choose_threads(engine: SpeculativeEngine, catalogue: Catalogue, budget: Budget, materialize: Materializer,
                   k: int) -> ThreadChoice:
    """Time runtime rounds with one draft of the catalogue at each thread count; torch is left at the fastest.

    The general draft if the budget admits it, else the smallest draft it admits, else target-only
    rounds: the measurement must not hold more draft memory than the node is allowed to. The
    measuring runtime is closed (its draft dropped) before the node's runtime loads its working set.
    """
    fitting = [s for s in catalogue if budget.admits([s.size_bytes])]
    spec = next((s for s in fitting if s.domain in ("general", "mixed")),
                min(fitting, key=lambda s: s.size_bytes) if fitting else None)
    prompt = engine.encode(PROBE_PROMPT)
    if spec is None:
        return fastest_thread_count(engine, None, prompt, k=k)
    runtime = DraftRuntime(engine, Catalogue([spec]), budget,
                           make_policy("static", draft_names=[spec.name], static_draft=spec.name),
                           RuntimeConfig(k=k), materialize=materialize)
    tokens = max(1, min(PROBE_TOKENS, engine.max_context - len(prompt) - 1))
    try:
        runtime.warm_up()
        runtime.generate(prompt, tokens)  # untimed: first-call initialisation

        def runtime_rounds(_threads: int, slow_s: float) -> float:
            # A count already twice as slow as the best (an oversubscribed CPU makes extra OpenMP
            # threads wait on each other) is stopped once its rounds could no longer catch up.
            start, cap = time.monotonic(), slow_s * tokens

            def too_slow() -> bool:
                return time.monotonic() - start > cap

            report = runtime.generate(prompt, tokens, should_stop=too_slow)
            return report.wall_s / max(1, report.rounds)

        return pick_fastest(runtime_rounds)
    finally:
        runtime.close()
