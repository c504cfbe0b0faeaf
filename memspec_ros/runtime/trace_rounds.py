"""Rounds replayed from an exact trace, timed by a cost model on a virtual clock.

The simulator's executor: the tokens of every round come from the session's exact greedy trace
(:meth:`~memspec_ros.runtime.traces.TurnTrace.round_at`, the engine's own rules), the time it
takes from a :class:`~memspec_ros.runtime.cost_model.CostModel` measured on the real
components. Each draft's KV cache is tracked (how much of the context it has seen), so a switch
or a fresh load costs the catch-up forward a real draft would run. The n-gram member needs no
trace column: its lookup runs on the replayed context itself, exactly as in a real round, and
its proposal is matched against the trace's tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from memspec_ros.core.finish_reason import FinishReason
from memspec_ros.core.greedy_match import accepted_prefix, proposal_length
from memspec_ros.core.ngram_proposer import NgramProposer
from memspec_ros.core.sampling import GREEDY, SamplingParams

from .cost_model import CostModel
from .loader import Loader, LoadTicket
from .policies.base import Policy
from .pool import DraftPool
from .residency import DraftState, ResidencyEvent
from .round_execution import RoundOutcome, predictor_calls
from .stop_strings import StopStrings
from .traces import DialogueTrace, TurnTrace
from .virtual_time import VirtualClock, VirtualLoader


class TraceTurn:
    """One turn of a trace, replayed round by round."""

    state = None

    def __init__(self, owner: TraceRounds, turn: TurnTrace, turn_index: int) -> None:
        self._owner = owner
        self._turn = turn
        self.prompt_ids = list(turn.prompt_ids)
        self.turn_index = turn_index
        self._pos = 0

    @property
    def done(self) -> bool:
        return self._pos >= len(self._turn.output_ids)

    @property
    def tokens(self) -> list[int]:
        return self._owner.tokens

    @property
    def remaining(self) -> int:
        return self._turn.max_new_tokens - self._pos

    def run(self, draft: str | None, handle: Any, k: int, counterfactual: bool) -> RoundOutcome:
        """The round the engine would run at this position, charged to the virtual clock."""
        owner, turn, pos, ctx = self._owner, self._turn, self._pos, self._owner.context_len
        cost, synced = owner.cost, owner.synced
        slowed = cost.loading_factor if owner.pool is not None and owner.pool.names_in(DraftState.LOADING) else 1.0
        draft_s = 0.0
        if isinstance(handle, NgramProposer):
            k_round = proposal_length(k, turn.max_new_tokens - pos)
            proposal = handle.propose(owner.tokens, k_round, GREEDY).tokens if k_round else []
            p = len(proposal)
            a = accepted_prefix(proposal, turn.output_ids[pos:pos + p])
            e = min(a + 1, len(turn.output_ids) - pos)
            draft_s = cost.propose_at(handle.name, k_round, 1, ctx) * slowed  # the lookup ran, match or not
        else:
            p, a, e = turn.round_at(draft, pos, k)
        used = draft if p > 0 else None  # the engine reports no draft for an empty proposal
        catchup = 0
        if used is not None and not isinstance(handle, NgramProposer):
            seen = min(synced.get(used, 0), ctx - 1)
            draft_s = cost.propose_at(used, p, ctx - seen, ctx) * slowed
            catchup = max(0, ctx - seen - 1)  # context fed beyond the newest token, as real rounds report
            synced[used] = ctx + min(a, p - 1)
        verify_s = cost.verify(p, ctx) * slowed
        extra_s = 0.0
        cf = None
        if counterfactual and p > 0:
            cf = {}
            for other in owner.pool.resident():
                if other == used:
                    continue
                n = min(turn.run_length(other, pos, p), e)
                seen = min(synced.get(other, 0), ctx - 1)
                extra_s += cost.propose_at(other, p, ctx - seen, ctx)
                synced[other] = ctx + min(n, p - 1)
                cf[other] = n
        owner.clock.advance(draft_s + verify_s + extra_s + cost.round_overhead_s)
        hidden = turn.hidden[pos: pos + e].astype(np.float32) if turn.hidden is not None else None
        self._pos += e
        owner.context_len += e
        owner.tokens.extend(turn.output_ids[pos: pos + e])
        return RoundOutcome(draft=used, proposed=p, accepted=a, emitted_ids=list(turn.output_ids[pos: pos + e]),
                            hidden=hidden, draft_s=draft_s, verify_s=verify_s, catchup_tokens=catchup,
                            context_tokens=ctx, counterfactual=cf,
                            counterfactual_s=extra_s)

    def finish(self, stopped: FinishReason | None) -> tuple[list[int], str, FinishReason]:
        return list(self._turn.output_ids), "", stopped or FinishReason(self._turn.finish_reason)


class TraceRounds:
    """The simulated world: a trace's rounds, a cost model's times, a virtual clock."""

    def __init__(self, cost: CostModel, clock: VirtualClock) -> None:
        self.cost = cost
        self.clock = clock
        self.pool: DraftPool | None = None
        self.loader: VirtualLoader | None = None
        self.synced: dict[str, int] = {}
        """Per draft: context tokens its KV cache holds."""
        self.context_len = 0
        self.tokens: list[int] = []
        """The replayed dialogue's tokens (what the n-gram member looks up in)."""
        self._trace: DialogueTrace | None = None
        self._calls_charged = 0

    def bind(self, pool: DraftPool, loader: Loader) -> None:
        assert isinstance(loader, VirtualLoader), "trace replay needs the virtual loader"
        self.pool = pool
        self.loader = loader
        pool.add_listener(self._on_residency)

    def replay(self, trace: DialogueTrace, policy: Policy) -> None:
        """The next conversation to run is ``trace`` (one conversation, fresh draft caches)."""
        self._trace = trace
        self.synced = {}
        self.context_len = 0
        self.tokens = []
        self._calls_charged = predictor_calls(policy)

    def begin_turn(self, prompt: Any, max_new_tokens: int, params: SamplingParams, conversation: Any,
                   stops: StopStrings | None = None) -> TraceTurn:
        """Prefill of the trace's next turn, which must be the turn asked for.

        A trace has tokens but no text, so it cannot replay stop strings.
        """
        if stops:
            raise ValueError("a trace replay cannot apply stop strings (it has no text)")
        if self._trace is None:
            raise RuntimeError("replay(trace, policy) first")
        index = conversation.turns
        if index >= len(self._trace.turns):
            raise ValueError(f"trace {self._trace.name!r} has {len(self._trace.turns)} turns; turn {index} asked for")
        turn = self._trace.turns[index]
        if prompt != turn.prompt or max_new_tokens != turn.max_new_tokens:
            raise ValueError(f"turn {index} of trace {self._trace.name!r} is {turn.prompt[:40]!r} with "
                             f"{turn.max_new_tokens} tokens; got {str(prompt)[:40]!r} with {max_new_tokens}")
        conversation.turns += 1
        prefilled = len(turn.prompt_ids) - (1 if index == 0 else 0)
        self.clock.advance(self.cost.prefill(prefilled) + self.cost.turn_overhead_s)
        kept = self.context_len - turn.rewind  # a rewound context: draft caches past it are stale too
        self.synced = {name: min(seen, kept) for name, seen in self.synced.items()}
        self.context_len = kept + len(turn.prompt_ids)
        self.tokens = [*self.tokens[:kept], *turn.prompt_ids]
        return TraceTurn(self, turn, index)

    def wait_for_load(self, ticket: LoadTicket, timeout_s: float,
                      should_stop: Callable[[], bool] | None = None) -> None:
        """Virtual time runs to the load's end: nothing can ask a replay to stop mid-round."""
        assert self.loader is not None
        self.loader.run_until_done(ticket)

    def charge_tick(self, policy: Policy) -> None:
        """A tick's measured bookkeeping plus the predictor calls it made."""
        calls = predictor_calls(policy)
        self.clock.advance(self.cost.tick_s + max(0, calls - self._calls_charged) * self.cost.predictor_s)
        self._calls_charged = calls

    def predictor_seconds(self, policy: Policy) -> float:
        return predictor_calls(policy) * self.cost.predictor_s

    def _on_residency(self, event: ResidencyEvent) -> None:
        # A freshly loaded draft is a new proposer with an empty KV cache.
        if event.current == DraftState.RESIDENT and event.previous == DraftState.LOADING:
            self.synced[event.draft] = 0
