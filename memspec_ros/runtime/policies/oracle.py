"""``oracle``: unlimited memory and hindsight - the upper bound MemSpec is compared against.

Every draft is resident (the runtime gives this policy an unlimited budget) and the best draft
for every *segment* is known from the session's exact trace. A segment is ``segment_rounds``
rounds (default 4, the default check interval: the stretch MemSpec forecasts for), restarted
at every turn; the best draft is the one that would emit the most tokens over the segment's
rounds, replayed from the trace. Ties keep the running draft (switching costs a catch-up), then
prefer the smaller draft (cheaper steps). ``segment_rounds=1`` gives the stricter per-round
hindsight bound (a different draft may win every round, which no forecaster can match).
"""

from __future__ import annotations

from typing import Protocol

from memspec_ros.core.greedy_match import proposal_length

from .base import Decision, Policy, PolicyView, SchedulePlan

DEFAULT_SEGMENT_ROUNDS = 4
"""The default check interval: the segment a forecast is made for."""


class AcceptanceOracle(Protocol):
    """Hindsight knowledge: tokens a draft gets accepted in a round at ``(turn, pos)``."""

    def accepted(self, draft: str, turn: int, pos: int, k_round: int) -> int: ...


class OraclePolicy(Policy):
    """Best draft per segment from an exact trace, with every draft resident."""

    name = "oracle"
    unlimited_memory = True

    def __init__(self, trace: AcceptanceOracle, segment_rounds: int = DEFAULT_SEGMENT_ROUNDS) -> None:
        super().__init__()
        if segment_rounds < 1:
            raise ValueError(f"segment_rounds must be >= 1, got {segment_rounds}")
        self.trace = trace
        self.segment_rounds = segment_rounds
        self._choice: str | None = None
        self._segment_end = 0  # round index at which the current segment ends

    def initial_working_set(self) -> list[str]:
        """Every draft."""
        assert self.catalogue is not None
        return self.catalogue.names

    def _new_turn(self, view: PolicyView) -> None:
        self._segment_end = view.round_index  # a new turn starts a new segment

    def _segment_tokens(self, draft: str, view: PolicyView) -> int:
        """Tokens ``draft`` would emit over the next ``segment_rounds`` rounds (exact replay)."""
        pos, remaining, tokens = view.turn_position, view.remaining, 0
        for _ in range(self.segment_rounds):
            k_round = proposal_length(view.k, remaining)
            if k_round <= 0:
                break
            emitted = self.trace.accepted(draft, view.turn, pos, k_round) + 1
            tokens, pos, remaining = tokens + emitted, pos + emitted, remaining - emitted
        return tokens

    def _choose(self, view: PolicyView) -> Decision:
        k_round = proposal_length(view.k, view.remaining)
        resident = [n for n in view.resident if n not in view.unusable]
        if not resident or k_round == 0:
            return Decision(resident[0] if resident else None)
        if view.round_index >= self._segment_end or self._choice not in resident:
            size = {n: view.catalogue.get(n).size_bytes for n in resident}

            def key(n: str) -> tuple[int, bool, int]:
                return (self._segment_tokens(n, view), n == view.active, -size[n])

            self._choice = max(resident, key=key)
            self._segment_end = view.round_index + self.segment_rounds
        return Decision(self._choice)

    def _plan(self, view: PolicyView) -> SchedulePlan:
        return SchedulePlan(want=tuple(view.usable()))
