"""Real runs: a policy through the runtime, and plain target-only decoding, on one session.

Each policy run builds a fresh :class:`~memspec_ros.runtime.DraftRuntime` (new pool, new loader
thread, new policy), loads the same initial working set before timing starts, then serves the
session's conversations one after the other (a new conversation at each topic shift, see
:mod:`bench.workloads`); the runtime and its drafts carry over. Timing is the runtime's own
per-turn wall time, which includes prefill, stalls, scheduling ticks and the predictor. Greedy
outputs are compared with the session's exact traces: every configuration must produce the
target's own tokens.
"""

from __future__ import annotations

import time

from memspec_ros.core.engine import DecodeState, SpeculativeEngine
from memspec_ros.runtime import Budget, DraftRuntime, GenerationReport, RuntimeConfig
from memspec_ros.runtime.conversation import Conversation
from memspec_ros.runtime.traces import Turn
from memspec_ros.runtime.turns import admit_workload_turn, answered, fit_user_message

from .measures import RunMeasure, measure_reports, with_check
from .output_check import check_outputs
from .policy_factory import PolicyFactory
from .testbed import Testbed
from .trace_cache import ConversationCursor, DialogueTraces
from .workloads import ScriptedDialogue


def serve_session(runtime: DraftRuntime, session: ScriptedDialogue, cursor: ConversationCursor | None = None
                  ) -> list[GenerationReport]:
    """Every conversation of ``session`` through ``runtime``; one report per turn."""
    reports: list[GenerationReport] = []
    for i, turns in enumerate(session.conversations):
        if cursor is not None:
            cursor.index = i
        conv = runtime.new_conversation()
        reports += [serve_turn(runtime, conv, t) for t in turns]
    return reports


def serve_turn(runtime: DraftRuntime, conversation: Conversation, turn: Turn) -> GenerationReport:
    """One workload turn: its text, or (a chat turn) its user message, admitted as the node admits a goal."""
    if not turn.chat:
        return runtime.generate(turn.prompt, turn.max_new_tokens, conversation=conversation)
    return runtime.run_turn(admit_workload_turn(runtime.engine, turn), conversation=conversation)


def run_policy(testbed: Testbed, session: ScriptedDialogue, traces: DialogueTraces, factory: PolicyFactory, name: str,
               budget: Budget, config: RuntimeConfig) -> tuple[RunMeasure, list[GenerationReport]]:
    """Run ``session`` with a fresh policy ``name`` for real; returns its measure and per-turn reports."""
    cursor = ConversationCursor(traces)
    runtime = DraftRuntime(testbed.engine, testbed.catalogue, budget, factory(name, cursor), config,
                           materialize=testbed.materialize)
    peak = [0]

    def track(event) -> None:  # runs under the pool's lock: just record a number
        peak[0] = max(peak[0], event.snapshot.used_bytes)

    runtime.add_residency_listener(track)
    try:
        runtime.warm_up()
        reports = serve_session(runtime, session, cursor)
        stats = runtime.statistics()
        guard = runtime.policy.guard_status()
    finally:
        runtime.close()
    measure = with_check(measure_reports(session.name, reports, peak_memory_bytes=peak[0],
                                         load_round_ratio=stats.load_round_ratio,
                                         predictor_fraction=stats.predictor_fraction),
                         check_outputs(testbed.engine.target, traces, [r.output_ids for r in reports]))
    if guard is not None:
        measure.guard_fallbacks, measure.guard_fallback_rounds = guard.fallbacks, guard.fallback_rounds
    return measure, reports


def run_target_only(engine: SpeculativeEngine, session: ScriptedDialogue, traces: DialogueTraces) -> RunMeasure:
    """Plain autoregressive decoding with the target (one forward per token, cache kept within a conversation)."""
    wall = verify = 0.0
    rounds = 0
    outputs: list[list[int]] = []
    for turns in session.conversations:
        conv: DecodeState | None = None
        chat = Conversation()
        for turn in turns:
            t0 = time.perf_counter()
            if turn.chat:  # rendered as the runtime renders it: the same tokens as the traces
                chat.state = conv
                fitted = fit_user_message(engine, chat, turn)
                conv = engine.run_turn(chat.state, fitted.prompt_ids, turn.max_new_tokens)
                answered(chat, fitted, conv.text())
            else:
                conv = engine.run_turn(conv, turn.prompt, turn.max_new_tokens)
            wall += time.perf_counter() - t0
            rounds += len(conv.stats)
            verify += sum(st.verify_seconds for st in conv.stats)
            outputs.append(list(conv.output_ids))
    tokens = sum(len(o) for o in outputs)
    return with_check(RunMeasure(session=session.name, tokens=tokens, wall_s=wall, rounds=rounds, verify_s=verify),
                      check_outputs(engine.target, traces, outputs))
