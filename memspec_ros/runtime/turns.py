"""A dialogue turn on its way in: admitted (tokenised once, checked), then fitted to its dialogue.

The node used to do this itself: it tokenised a goal's prompt to check it against the context
window, again to decide whether a long dialogue had to slide, and the engine tokenised it a third
time; sliding edited the conversation from ROS code. Here the prompt is tokenised once, at
admission, without special tokens: whether it opens a dialogue (and gets the tokenizer's special
tokens, :meth:`SpeculativeEngine.opening`) or continues one is only known when the turn runs
(a queued goal's session may not have started yet), and both are built from the same ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.errors import InvalidRequestError

from .conversation import Conversation


@dataclass(frozen=True)
class TurnRequest:
    """An admitted turn: its prompt's token ids (no special tokens) and its length limit."""

    turn_ids: tuple[int, ...]
    max_new_tokens: int


@dataclass(frozen=True)
class Admission:
    """The outcome of :func:`admit`: a request to run, or what the caller must fix."""

    request: TurnRequest | None = None
    problem: str | None = None


@dataclass(frozen=True)
class FittedTurn:
    """The ids a turn starts with, and how much of its dialogue survived a slide."""

    prompt_ids: list[int]
    kept_tokens: int | None = None
    """``None``: the dialogue fitted; otherwise it restarted from its last ``kept_tokens`` tokens."""


def admit(engine: SpeculativeEngine, prompt: str, max_new_tokens: int) -> Admission:
    """Tokenise ``prompt`` once and check that the turn alone fits the context window.

    A dialogue that would overflow is not a reason to refuse: it slides when the turn runs
    (:func:`fit_turn`). Only a turn that cannot fit even in an empty window is refused.
    """
    try:
        ids = engine.encode(prompt, add_special_tokens=False)
    except InvalidRequestError as exc:
        return Admission(problem=str(exc))
    try:
        engine.check_budget(0, len(engine.opening(ids)), max_new_tokens)
    except InvalidRequestError as exc:
        return Admission(problem=f"{exc}: shorten the prompt or ask for fewer tokens")
    return Admission(request=TurnRequest(tuple(ids), max_new_tokens))


def fit_turn(engine: SpeculativeEngine, conversation: Conversation, request: TurnRequest) -> FittedTurn:
    """The ids ``request`` starts with in ``conversation``; slides a dialogue that would overflow.

    A long robot dialogue outgrows the context window; instead of refusing the next turn, the
    dialogue restarts from its most recent tokens (at most half the window) followed by the new
    turn, the usual sliding-window behaviour of chat front ends. The caller checkpoints the
    conversation first, so a turn that then fails gets the full history back.
    """
    state = conversation.state
    turn = list(request.turn_ids)
    if state is None:
        return FittedTurn(engine.opening(turn))
    needed = len(turn) + request.max_new_tokens
    if len(state.token_ids) + needed <= engine.max_context:
        return FittedTurn(turn)
    wrapping = len(engine.special_prefix) + len(engine.special_suffix)
    keep = max(0, min(engine.max_context // 2, engine.max_context - needed - wrapping))
    tail = state.token_ids[len(state.token_ids) - keep:] if keep else []
    conversation.reset()
    return FittedTurn(engine.opening([*tail, *turn]), kept_tokens=keep)
