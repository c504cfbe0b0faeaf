"""Text deltas and running figures of a turn, for a caller that streams them (the node's feedback).

Detokenising belongs with the tokens: the runtime knows when a turn ends (the final flush of a
character split across tokens) and which draft ran, so it hands the caller finished deltas
instead of the engine's decoding state. Deltas are batched every ``every`` rounds to bound the
message rate; their concatenation is always exactly the turn's text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .round_execution import RoundOutcome


@dataclass(frozen=True)
class TurnProgress:
    """What a turn produced since the previous progress, and its running totals."""

    delta: str
    tokens: int
    """Tokens generated so far in this turn."""
    draft: str | None
    """Draft of the latest round (``None``: target-only, or the end-of-turn flush)."""
    rounds: int
    proposed: int
    accepted: int

    @property
    def acceptance_rate(self) -> float:
        """Accepted / proposed draft tokens so far in this turn."""
        return self.accepted / self.proposed if self.proposed else 0.0


class TextStream:
    """Turns rounds into :class:`TurnProgress` calls: every ``every`` rounds, at the end, and a
    final flush (text held back at a character boundary, or the rest of a cancelled turn)."""

    def __init__(self, emit: Callable[[TurnProgress], None], every: int = 1) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self._emit = emit
        self._every = every
        self.rounds = self.proposed = self.accepted = 0

    def round(self, outcome: RoundOutcome, state: Any) -> None:
        """Account one round; emit if it is the ``every``-th or the turn just ended."""
        self.rounds += 1
        self.proposed += outcome.proposed
        self.accepted += outcome.accepted
        if state is not None and (self.rounds % self._every == 0 or state.done):
            self._send(state, outcome.draft)

    def close(self, state: Any) -> None:
        """The turn is over: send whatever text is still unsent."""
        if state is not None:
            self._send(state, None)

    def _send(self, state: Any, draft: str | None) -> None:
        delta = state.new_text()
        if delta:
            self._emit(TurnProgress(delta=delta, tokens=len(state.output_ids), draft=draft, rounds=self.rounds,
                                    proposed=self.proposed, accepted=self.accepted))
