"""Pick torch's intra-op thread count by measuring speculative rounds on the models in use.

At batch 1 a small model's step is mostly per-operator overhead, and extra threads add
synchronisation to every operator: on the 2-core machine the benchmark runs on, torch's default
of 2 threads left target-only decoding where it was and cost MemSpec 20% (the draft steps and
the background loader then fight for the cores). On a Jetson with a 1B target the answer is
different. So the node does not guess: at configure it times a few speculative rounds at each
candidate count and keeps the fastest, and says so in its log.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .engine import SpeculativeEngine
from .proposer import DraftProposer


@dataclass(frozen=True)
class ThreadChoice:
    """The chosen thread count and what every candidate measured."""

    threads: int
    round_s: dict[int, float]
    """Median seconds of one speculative round by thread count."""

    def describe(self) -> str:
        """One log line: the choice and the measurements it rests on."""
        cells = ", ".join(f"{t} -> {s * 1e3:.1f} ms" for t, s in sorted(self.round_s.items()))
        return f"{self.threads} torch thread(s) (median speculative round: {cells})"


def candidate_thread_counts(cores: int | None = None) -> list[int]:
    """1, 2, 4, ... up to the cores this process may run on (and that count itself)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    counts = [1]
    while counts[-1] * 2 <= cores:
        counts.append(counts[-1] * 2)
    if counts[-1] != cores:
        counts.append(cores)
    return counts


def fastest_thread_count(engine: SpeculativeEngine, proposer: DraftProposer | None, prompt_ids: Sequence[int], *,
                         k: int = 4, rounds: int = 12, candidates: Sequence[int] | None = None,
                         margin: float = 0.15) -> ThreadChoice:
    """Time ``rounds`` speculative rounds (after two untimed ones) at each candidate thread count.

    Leaves torch set to the fastest. The rounds decode ``prompt_ids`` greedily with ``proposer``
    (a target-only round when None); the text is thrown away, only the time counts. Candidates
    are measured twice, in alternating order, keeping each one's better median: whichever runs
    first would otherwise pay for cold caches. A candidate at twice the best median so far is cut
    short (oversubscribed cores make a round ten times slower, and configure should not wait).

    More threads must win by ``margin`` to be chosen: the rounds are timed alone, but the node
    also runs a background loader and executor threads that need cores. On the 2-core machine
    two threads timed 4% faster alone and cost MemSpec 20% in the benchmark.
    """
    def engine_rounds(_threads: int, slow_s: float) -> float:
        return median_round_s(engine, proposer, prompt_ids, k=k, rounds=rounds, slow_s=slow_s)

    return pick_fastest(engine_rounds, candidates, margin=margin)


def median_round_s(engine: SpeculativeEngine, proposer: DraftProposer | None, prompt_ids: Sequence[int], *,
                   k: int = 4, rounds: int = 12, slow_s: float = float("inf")) -> float:
    """Median seconds of one round (after two untimed ones) continuing ``prompt_ids`` greedily.

    ``proposer`` drafts up to ``k`` tokens a round (None: a plain target step). Timing stops early
    once the median exceeds ``slow_s``; inf when no round ran.
    """
    room = engine.max_context - len(prompt_ids)  # a small max_context must not fail configure
    state = engine.start(list(prompt_ids), max_new_tokens=max(1, min((rounds + 2) * (k + 1), room)))
    times: list[float] = []
    for i in range(rounds + 2):
        if state.done:
            break
        start = time.perf_counter()
        state.step(proposer, k)
        if i >= 2:
            times.append(time.perf_counter() - start)
            if len(times) >= 3 and statistics.median(times) > slow_s:
                break  # clearly slower than the best so far: no need to time it fully
    if proposer is not None:
        proposer.reset()
    return statistics.median(times) if times else float("inf")


def pick_fastest(round_s: Callable[[int, float], float], candidates: Sequence[int] | None = None, *,
                 margin: float = 0.15) -> ThreadChoice:
    """Measure ``round_s(threads, slow_s)`` at each candidate count, twice in alternating order, and keep
    the fastest; torch is left set to it.

    ``round_s`` runs with torch set to ``threads`` and returns a median round time; it may stop
    early once its median exceeds ``slow_s`` (twice the best so far). Each candidate keeps its
    better measurement (whichever runs first pays for cold caches), and more threads must win by
    ``margin`` (the node also runs a loader and executor threads that need cores).
    """
    counts = sorted(candidates or candidate_thread_counts())
    measured: dict[int, float] = {}
    for threads in [*counts, *reversed(counts)]:
        torch.set_num_threads(threads)
        median = round_s(threads, 2 * min(measured.values(), default=float("inf")))
        measured[threads] = min(median, measured.get(threads, float("inf")))
    best = counts[0]
    for threads in sorted(measured):
        if measured[threads] < measured[best] * (1.0 - margin):
            best = threads
    torch.set_num_threads(best)
    return ThreadChoice(threads=best, round_s=measured)
