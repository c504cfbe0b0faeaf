"""Simulated runs: the same policy code on a session's exact traces, on a virtual clock.

The sweeps run hundreds of configurations; real runs would take hours, the runtime's
:class:`~memspec_ros.runtime.Simulator` takes milliseconds and is checked against the real runs
of the headline experiment (``simulator_validation`` in the results). One simulator serves all
of a session's conversations in turn, as one runtime does in a real run (pool, policy and
virtual clock carry over). Target-only decoding has no policy to simulate; its modelled time
is the cost model's prefill and one-token steps.
"""

from __future__ import annotations

from memspec_ros.runtime import Budget, Catalogue, CostModel, RuntimeConfig, Simulator

from .measures import RunMeasure, measure_reports
from .policy_factory import PolicyFactory
from .trace_cache import ConversationCursor, DialogueTraces


def simulate(catalogue: Catalogue, budget: Budget, factory: PolicyFactory, name: str, traces: DialogueTraces,
             cost: CostModel, config: RuntimeConfig, *, keep_reports: list | None = None) -> RunMeasure:
    """A fresh policy ``name`` on one session's traces; ``keep_reports`` collects the per-turn reports."""
    cursor = ConversationCursor(traces)
    sim = Simulator(catalogue, budget, factory(name, cursor), cost, config)
    peak = [0]

    def track(event) -> None:
        peak[0] = max(peak[0], event.snapshot.used_bytes)

    sim.pool.add_listener(track)
    sim.warm_up()
    reports = []
    for i, trace in enumerate(traces.conversations):
        cursor.index = i
        reports += sim.run(trace).reports
    if keep_reports is not None:
        keep_reports.extend(reports)
    measure = measure_reports(traces.name, reports, peak_memory_bytes=peak[0])
    guard = sim.policy.guard_status()
    if guard is not None:
        measure.guard_fallbacks, measure.guard_fallback_rounds = guard.fallbacks, guard.fallback_rounds
    return measure


def model_target_only(traces: DialogueTraces, cost: CostModel) -> RunMeasure:
    """Modelled target-only decoding of a session: prefill per turn, one target step per token, each
    at the context it runs at (the cache is kept within a conversation, as in the real run).

    No runtime bookkeeping is charged: target-only decoding runs the engine directly. ``verify_s``
    is the steps' share (prefill excluded), as in the real run's measure.
    """
    wall = steps = 0.0
    tokens = 0
    for conv in traces.conversations:
        context = 0
        for i, turn in enumerate(conv.turns):
            n = len(turn.output_ids)
            context += len(turn.prompt_ids) - turn.rewind
            wall += cost.prefill(len(turn.prompt_ids) - (1 if i == 0 else 0))
            step_s = sum(cost.verify(0, context + j) for j in range(n))
            wall += step_s
            steps += step_s
            context += n
            tokens += n
    return RunMeasure(session=traces.name, tokens=tokens, wall_s=wall, rounds=tokens, verify_s=steps)
