"""Text deltas and running figures of a turn, for a caller that streams them (the node's feedback).

Detokenising belongs with the tokens: the runtime knows when a turn ends (the final flush of a
character split across tokens) and which draft ran, so it hands the caller finished deltas
instead of the engine's decoding state. Deltas are batched every ``every`` rounds to bound the
message rate; their concatenation is always exactly the turn's text.

Text is held back while it might change: a trailing incomplete UTF-8 character (shown as
U+FFFD until its last byte arrives), and a tail that could be the beginning of a stop string
(:meth:`StopStrings.held_back`). A stop string found in a round is cut off the turn before the
round's delta is made, so no delta ever contains it or anything after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .round_execution import RoundOutcome
from .stop_strings import StopStrings


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

    def __init__(self, emit: Callable[[TurnProgress], None], every: int = 1,
                 stops: StopStrings | None = None) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self._emit = emit
        self._every = every
        self._stops = stops if stops else None
        self._sent = 0
        """Characters of the turn's text already emitted."""
        self.rounds = self.proposed = self.accepted = 0

    def round(self, outcome: RoundOutcome, state: Any) -> None:
        """Account one round; emit if it is the ``every``-th or the turn just ended."""
        self.rounds += 1
        self.proposed += outcome.proposed
        self.accepted += outcome.accepted
        if state is not None and (self.rounds % self._every == 0 or state.done):
            self._send(state, outcome.draft, final=False)

    def close(self, state: Any) -> None:
        """The turn is over: send whatever text is still unsent."""
        if state is not None:
            self._send(state, None, final=True)

    def _send(self, state: Any, draft: str | None, *, final: bool) -> None:
        """Emit the turn's text from where the last delta ended to what is settled now.

        Decodes the turn's whole output each time (the text a stop string is searched in
        anyway): a turn is at most ``max_new_tokens_limit`` tokens, and the decode of a few
        hundred tokens costs microseconds next to a round.
        """
        text = state.text()
        end = len(text)
        if not final:
            while end > self._sent and text[end - 1] == "\ufffd":
                end -= 1
            if self._stops is not None:
                end -= min(self._stops.held_back(text[:end]), end - self._sent)
        if end > self._sent:
            delta, self._sent = text[self._sent:end], end
            self._emit(TurnProgress(delta=delta, tokens=len(state.output_ids), draft=draft, rounds=self.rounds,
                                    proposed=self.proposed, accepted=self.accepted))
