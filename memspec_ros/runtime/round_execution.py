"""What executes a round: the one seam between the runtime's round loop and the world.

:meth:`DraftRuntime.generate` is the only round loop. Real runs and the simulator differ only in
what carries out a round and how time passes, so the loop is parameterised by a
:class:`RoundExecutor`: :class:`~memspec_ros.runtime.engine_rounds.EngineRounds` runs the real
engine on the wall clock, :class:`~memspec_ros.runtime.trace_rounds.TraceRounds` replays an
exact trace and charges a cost model's times to a virtual clock. Before this seam the simulator
carried its own copy of the loop, and the copies drifted (simulated reports lacked fields).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from memspec_ros.core.finish_reason import FinishReason
from memspec_ros.core.sampling import SamplingParams
from memspec_ros.core.stats import RoundStats

from .loader import Loader, LoadTicket
from .policies.base import Policy
from .pool import DraftPool
from .stop_strings import StopStrings


@dataclass(frozen=True)
class RoundOutcome:
    """What one round did, in the terms the loop accounts for."""

    draft: str | None
    """The draft that proposed (``None``: no proposal, e.g. target-only or no room left)."""
    proposed: int
    accepted: int
    emitted_ids: list[int]
    hidden: np.ndarray | None
    """Target hidden states of the emitted tokens (the predictor's context signal)."""
    draft_s: float
    verify_s: float
    catchup_tokens: int = 0
    context_tokens: int = 0
    """Tokens in the dialogue before the round (attention cost grows with them)."""
    counterfactual: dict[str, int] | None = None
    """Tokens each other resident draft would have had accepted (when asked for)."""
    counterfactual_s: float = 0.0
    stats: RoundStats | None = None
    """The engine's own statistics (real rounds; streamed to ``on_round``)."""

    @property
    def emitted(self) -> int:
        """Tokens this round added to the output."""
        return len(self.emitted_ids)


class TurnRounds(Protocol):
    """One dialogue turn being executed round by round."""

    prompt_ids: list[int]
    """Tokens the turn's prompt added to the dialogue."""
    turn_index: int
    state: Any
    """What ``on_round`` receives as its second argument (the engine's :class:`DecodeState`;
    ``None`` in replay, which has tokens but no text)."""

    @property
    def done(self) -> bool: ...

    @property
    def tokens(self) -> list[int]:
        """The dialogue's tokens so far (what the n-gram member looks up in)."""
        ...

    @property
    def remaining(self) -> int: ...

    def run(self, draft: str | None, handle: Any, k: int, counterfactual: bool) -> RoundOutcome:
        """Run one round with ``draft`` (its pool handle) proposing up to ``k`` tokens."""
        ...

    def finish(self, stopped: FinishReason | None) -> tuple[list[int], str, FinishReason]:
        """``(output_ids, text, finish_reason)`` of the turn; ``stopped``: why it was cut short."""
        ...


class RoundExecutor(Protocol):
    """Runs turns and rounds, and says what waiting and scheduling cost."""

    def bind(self, pool: DraftPool, loader: Loader) -> None:
        """Attach to the runtime's pool and loader (once, at construction)."""
        ...

    def begin_turn(self, prompt: Any, max_new_tokens: int, params: SamplingParams, conversation: Any,
                   stops: StopStrings | None = None) -> TurnRounds:
        """Start a turn of ``conversation`` (prefill); it ends at the first of ``stops`` in its text."""
        ...

    def wait_for_load(self, ticket: LoadTicket, timeout_s: float,
                      should_stop: Callable[[], bool] | None = None) -> None:
        """Block (or advance virtual time) until ``ticket`` finishes, ``timeout_s`` passes or
        ``should_stop()`` (a cancel, a deactivate) says the generation is ending."""
        ...

    def charge_tick(self, policy: Policy) -> None:
        """Account the time of a scheduling decision that just ran (virtual clocks only)."""
        ...

    def predictor_seconds(self, policy: Policy) -> float:
        """Seconds ``policy``'s predictor has cost so far."""
        ...


def predictor_calls(policy: Policy) -> int:
    """Predictor calls ``policy`` has made so far (0 without a predictor)."""
    pred = getattr(policy, "predictor", None)
    return int(getattr(pred, "calls", 0)) if pred is not None else 0

