"""``oracle``: unlimited memory and hindsight - the upper bound MemSpec is compared against.

Every draft is resident (the runtime gives this policy an unlimited budget) and for every
round the draft that will get the most tokens accepted is known from the session's exact
trace. Ties keep the running draft (switching costs a catch-up), then prefer the smaller draft
(cheaper steps).
"""

from __future__ import annotations

from typing import Protocol

from .base import Decision, Policy, PolicyView, SchedulePlan


class AcceptanceOracle(Protocol):
    """Hindsight knowledge: tokens a draft gets accepted in a round at ``(turn, pos)``."""

    def accepted(self, draft: str, turn: int, pos: int, k_round: int) -> int: ...


class OraclePolicy(Policy):
    """Best draft per round from an exact trace, with every draft resident."""

    name = "oracle"
    never_stalls = True
    unlimited_memory = True

    def __init__(self, trace: AcceptanceOracle) -> None:
        super().__init__()
        self.trace = trace

    def initial_working_set(self) -> list[str]:
        """Every draft."""
        assert self.catalogue is not None
        return self.catalogue.names

    def _choose(self, view: PolicyView) -> Decision:
        k_round = max(0, min(view.k, view.remaining - 1))
        resident = [n for n in view.resident if n not in view.unusable]
        if not resident or k_round == 0:
            return Decision(resident[0] if resident else None)
        size = {n: view.catalogue.get(n).size_bytes for n in resident}

        def key(n: str) -> tuple[int, bool, int]:
            return (self.trace.accepted(n, view.turn, view.turn_position, k_round), n == view.active, -size[n])

        return Decision(max(resident, key=key))

    def _plan(self, view: PolicyView) -> SchedulePlan:
        return SchedulePlan(want=tuple(view.usable()))
