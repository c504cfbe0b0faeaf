"""Rounds on the real engine, timed by the wall clock (the runtime's default executor)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from memspec_ros.core.engine import DecodeState, Prompt, SpeculativeEngine
from memspec_ros.core.finish_reason import FinishReason
from memspec_ros.core.greedy_match import accepted_prefix
from memspec_ros.core.sampling import GREEDY, SamplingParams

from .loader import Loader, LoadTicket
from .policies.base import Policy
from .pool import DraftPool, InvalidTransition
from .round_execution import RoundOutcome
from .stop_strings import StopStrings


class EngineTurn:
    """One turn of a real :class:`DecodeState`."""

    def __init__(self, state: DecodeState, prompt_ids: list[int], turn_index: int, pool: DraftPool,
                 clock: Callable[[], float], stops: StopStrings | None = None) -> None:
        self.state = state
        self.prompt_ids = prompt_ids
        self.turn_index = turn_index
        self._pool = pool
        self._clock = clock
        self._stops = stops if stops else None

    @property
    def done(self) -> bool:
        return self.state.done

    @property
    def tokens(self) -> list[int]:
        return self.state.token_ids

    @property
    def remaining(self) -> int:
        return self.state.remaining

    def run(self, draft: str | None, handle: Any, k: int, counterfactual: bool) -> RoundOutcome:
        """One engine round; with ``counterfactual``, score every other resident draft on it."""
        state = self.state
        context = len(state.token_ids)
        ctx_before = list(state.token_ids) if counterfactual else None
        stats = state.step(handle, k)
        emitted = state.token_ids[len(state.token_ids) - stats.emitted:]
        hidden = state.verified_hidden_states
        cf, cf_s = None, 0.0
        if ctx_before is not None and stats.proposed > 0:
            t0 = self._clock()
            cf = self._counterfactual(ctx_before, emitted, stats.proposed, stats.draft_name)
            cf_s = self._clock() - t0
        if self._stops is not None:
            # After every round, so the turn ends in the round that produced the stop string:
            # its text, tokens and KV cache are cut right before it.
            at = self._stops.find(state.text())
            if at is not None:
                state.stop_at(at)
        return RoundOutcome(draft=stats.draft_name, proposed=stats.proposed, accepted=stats.accepted,
                            emitted_ids=list(emitted),
                            hidden=None if hidden is None else hidden.detach().float().cpu().numpy(),
                            draft_s=stats.draft_seconds, verify_s=stats.verify_seconds,
                            catchup_tokens=stats.catchup_tokens, context_tokens=context, counterfactual=cf,
                            counterfactual_s=cf_s,
                            stats=stats)

    def finish(self, stopped: FinishReason | None) -> tuple[list[int], str, FinishReason]:
        state = self.state
        reason = stopped or state.finish_reason or FinishReason.LENGTH
        if stopped is not None:
            # A stopped turn leaves the dialogue mid-turn; close it so the dialogue can go on.
            state.finish_reason = stopped
        return list(state.output_ids), state.text(), reason

    def _counterfactual(self, ctx_before: list[int], emitted: list[int], k_round: int,
                        ran: str | None) -> dict[str, int]:
        """Tokens each other resident draft would have had accepted this round (HedgeSpec-style)."""
        out: dict[str, int] = {}
        for name in self._pool.resident():
            if name == ran:
                continue
            try:
                proposer = self._pool.acquire(name)
            except InvalidTransition:
                continue
            try:
                tokens = proposer.propose(ctx_before, k_round, GREEDY).tokens
            finally:
                self._pool.release(name)
            out[name] = accepted_prefix(tokens, emitted)
        return out


class EngineRounds:
    """The real world: the speculative engine runs rounds and time is what they take."""

    def __init__(self, engine: SpeculativeEngine, clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine = engine
        self._clock = clock
        self._pool: DraftPool | None = None

    def bind(self, pool: DraftPool, loader: Loader) -> None:
        self._pool = pool

    def begin_turn(self, prompt: Prompt, max_new_tokens: int, params: SamplingParams, conversation: Any,
                   stops: StopStrings | None = None) -> EngineTurn:
        """Prefill: open the conversation's decoding state, or continue it with a new prompt."""
        assert self._pool is not None, "bind() first"
        if conversation.state is None:
            state = self.engine.start(prompt, max_new_tokens, params)
            conversation.state = state
            prompt_ids = list(state.token_ids)
            turn_index = 0
        else:
            state = conversation.state
            before = len(state.token_ids)
            state.continue_with(prompt, max_new_tokens, params)
            prompt_ids = state.token_ids[before:]
            turn_index = conversation.turns
        conversation.turns += 1
        return EngineTurn(state, prompt_ids, turn_index, self._pool, self._clock, stops)

    STOP_POLL_S = 0.05
    """How often a stalled round checks ``should_stop`` while it waits for a load."""

    def wait_for_load(self, ticket: LoadTicket, timeout_s: float,
                      should_stop: Callable[[], bool] | None = None) -> None:
        deadline = time.monotonic() + timeout_s
        while not ticket.wait(min(self.STOP_POLL_S, max(0.0, deadline - time.monotonic()))):
            if (should_stop is not None and should_stop()) or time.monotonic() >= deadline:
                return

    def charge_tick(self, policy: Policy) -> None:
        """Nothing to add: the wall clock saw the tick."""

    def predictor_seconds(self, policy: Policy) -> float:
        pred = getattr(policy, "predictor", None)
        return float(getattr(pred, "seconds", 0.0)) if pred is not None else 0.0
