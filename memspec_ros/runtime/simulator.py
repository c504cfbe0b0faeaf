"""Trace-driven simulation: the runtime's own round loop, a virtual clock, exact greedy tokens.

A :class:`Simulator` is a :class:`~memspec_ros.runtime.runtime.DraftRuntime` - the same round
loop, pool, scheduler, trackers and policy objects as a real run - built with two things
substituted: what executes a round (:class:`~memspec_ros.runtime.trace_rounds.TraceRounds`:
tokens from the session's exact trace, times from a
:class:`~memspec_ros.runtime.cost_model.CostModel`) and time itself (a
:class:`~memspec_ros.runtime.virtual_time.VirtualClock`, with a
:class:`~memspec_ros.runtime.virtual_time.VirtualLoader` that completes loads on it). There are
no threads and no wall-clock reads, so a run is deterministic: same inputs, same timeline, to
the bit. Its reports are real reports, every field filled by the same code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .catalogue import Budget, Catalogue
from .cost_model import CostModel
from .loader import LoadRecord
from .ngram_member import ngram_rounds
from .online_learning import LearnReport, examples_from_turn
from .policies.base import Policy
from .residency import DraftState
from .round_execution import predictor_calls
from .runtime import DraftRuntime, GenerationReport, RuntimeConfig
from .trace_rounds import TraceRounds
from .traces import DialogueTrace, TurnTrace
from .virtual_time import VirtualClock, VirtualLoader


@dataclass
class SimulationResult:
    """Per-turn reports (same type as real runs) and totals."""

    reports: list[GenerationReport] = field(default_factory=list)
    load_records: list[LoadRecord] = field(default_factory=list)
    """The loader's most recent records at the end of the session (a rolling window, as in real runs)."""
    predictor_calls: int = 0
    learn_reports: list[LearnReport] = field(default_factory=list)
    """One per turn when the runtime learns online (:meth:`DraftRuntime.enable_learning`)."""

    @property
    def tokens(self) -> int:
        """Tokens over the session."""
        return sum(r.tokens for r in self.reports)

    @property
    def wall_s(self) -> float:
        """Virtual seconds over the session."""
        return sum(r.wall_s for r in self.reports)

    @property
    def tokens_per_s(self) -> float:
        """Session tokens per virtual second."""
        return self.tokens / self.wall_s if self.wall_s else 0.0

    @property
    def stall_s(self) -> float:
        """Virtual seconds spent waiting for loads."""
        return sum(r.stall_s for r in self.reports)


class Simulator:
    """Runs one policy over session traces on a virtual clock (one runtime across sessions)."""

    def __init__(self, catalogue: Catalogue, budget: Budget, policy: Policy, cost: CostModel,
                 config: RuntimeConfig | None = None, *, fail_loads: Sequence[str] = ()) -> None:
        config = dataclasses.replace(config or RuntimeConfig(), scheduling="inline")
        self.clock = VirtualClock()
        self.cost = cost
        self.rounds = TraceRounds(cost, self.clock)
        self.runtime = DraftRuntime(
            self.rounds, catalogue, budget, policy, config, clock=self.clock,
            loader=lambda pool: VirtualLoader(pool, self.clock, dict(cost.load_s), config.space_wait_s, fail_loads))
        self.pool = self.runtime.pool
        self.loader = self.runtime.loader
        self.policy = policy

    def _learn_from(self, turn: TurnTrace) -> LearnReport:
        """Online learning after a replayed turn, as :meth:`DraftRuntime.learn_from_last_turn` does in
        a real run: labels for the drafts resident now (the trace holds every draft's teacher-forced
        match; only those in memory could be run), the n-gram member's lookups replayed. Between
        turns, so no virtual time is charged: in the node it runs in idle time."""
        runtime = self.runtime
        learner = runtime.learner
        assert learner is not None
        names = learner.predictor.draft_names
        match = {n: turn.match[n] for n in self.pool.resident() if n in names and n in turn.match}
        if runtime.ngram is not None:
            observe = getattr(runtime.policy, "observe_ngram_replay", None)
            if observe is not None:
                tokens = self.rounds.tokens
                observe(ngram_rounds(runtime.ngram, tokens, len(tokens) - len(turn.output_ids), runtime.config.k))
        x, y, mask = examples_from_turn(turn.prompt_ids, turn.output_ids, turn.hidden, match, names,
                                        learner.predictor.hidden_size, k=runtime.config.k,
                                        max_new_tokens=turn.max_new_tokens)
        return learner.learn(x, y, mask)

    def set_hint(self, domain: str | None) -> None:
        """Same as :meth:`DraftRuntime.set_hint`."""
        self.runtime.set_hint(domain)

    def warm_up(self, drafts: Sequence[str] | None = None) -> list[str]:
        """Load the initial working set instantly (the real runtime does it before timing)."""
        names = list(drafts) if drafts is not None else self.policy.initial_working_set()
        for n in names:
            if self.pool.state(n) == DraftState.ON_STORAGE and self.pool.can_admit(n):
                self.pool.begin_load(n)
                self.pool.complete_load(n, object())
        return self.pool.resident()

    def run(self, trace: DialogueTrace,
            on_report: Callable[[int, GenerationReport], None] | None = None) -> SimulationResult:
        """Simulate one session (all its turns, one conversation); ``on_report(turn index, report)`` after each."""
        calls0 = predictor_calls(self.runtime.policy)
        self.rounds.replay(trace, self.runtime.policy)
        conversation = self.runtime.new_conversation()
        result = SimulationResult()
        for i, turn in enumerate(trace.turns):
            result.reports.append(self.runtime.generate(turn.prompt, turn.max_new_tokens,
                                                        conversation=conversation))
            if self.runtime.learner is not None:
                result.learn_reports.append(self._learn_from(turn))
            if on_report is not None:
                on_report(i, result.reports[-1])
        result.load_records = self.loader.records()
        result.predictor_calls = predictor_calls(self.runtime.policy) - calls0
        return result
