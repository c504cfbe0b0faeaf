"""A dialogue turn on its way in: admitted (tokenised once, checked), then fitted to its dialogue.

The node used to do this itself: it tokenised a goal's prompt to check it against the context
window, again to decide whether a long dialogue had to slide, and the engine tokenised it a third
time; sliding edited the conversation from ROS code. Here the prompt is tokenised once, at
admission, without special tokens: whether it opens a dialogue (and gets the tokenizer's special
tokens, :meth:`SpeculativeEngine.opening`) or continues one is only known when the turn runs
(a queued goal's session may not have started yet), and both are built from the same ids.

A chat turn (messages, :mod:`.chat`) is admitted by rendering its own messages (and system
prompt) alone: what it will render to inside its conversation is only known when the turn
runs, after the turns queued before it have answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.errors import InvalidRequestError

from .chat import ChatMessage, ChatTurn, chat_problem, common_prefix, fit_chat, render_ids
from .conversation import Conversation
from .stop_strings import stop_problem


@dataclass(frozen=True)
class TurnRequest:
    """An admitted turn: its input's token ids, its length limit and its stop strings.

    For a prompt, ``turn_ids`` are the prompt's ids without special tokens; for a chat turn
    (``chat`` set) the rendering of its own messages, as admission checked it.
    """

    turn_ids: tuple[int, ...]
    max_new_tokens: int
    stop: tuple[str, ...] = ()
    chat: ChatTurn | None = None


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
    messages: tuple[ChatMessage, ...] | None = None
    """A chat turn: the conversation it renders (the runtime stores it, with the answer, after
    the turn); ``None`` for a prompt."""
    reused_tokens: int = 0
    """Tokens of the conversation's KV cache the turn keeps (the rest of its input is prefilled)."""


def admit(engine: SpeculativeEngine, prompt: str | ChatTurn, max_new_tokens: int,
          stop: Sequence[str] = ()) -> Admission:
    """Tokenise ``prompt`` once (or render a chat turn's messages) and check that the turn
    alone fits the context window.

    A dialogue that would overflow is not a reason to refuse: it slides when the turn runs
    (:func:`fit_turn`). Only a turn that cannot fit even in an empty window is refused.
    """
    problem = stop_problem(stop)
    if problem is not None:
        return Admission(problem=problem)
    chat = prompt if isinstance(prompt, ChatTurn) else None
    try:
        if chat is not None:
            problem = chat_problem(chat)
            if problem is not None:
                return Admission(problem=problem)
            ids = render_ids(engine, [*([ChatMessage("system", chat.system_prompt)] if chat.system_prompt else []),
                                      *chat.messages])
            opened = ids
        else:
            ids = engine.encode(prompt, add_special_tokens=False)
            opened = engine.opening(ids)
    except InvalidRequestError as exc:
        return Admission(problem=str(exc))
    try:
        engine.check_budget(0, len(opened), max_new_tokens)
    except InvalidRequestError as exc:
        what = "the messages" if chat is not None else "the prompt"
        return Admission(problem=f"{exc}: shorten {what} or ask for fewer tokens")
    return Admission(request=TurnRequest(tuple(ids), max_new_tokens, tuple(stop), chat))


def fit_turn(engine: SpeculativeEngine, conversation: Conversation, request: TurnRequest) -> FittedTurn:
    """The ids ``request`` starts with in ``conversation``; slides a dialogue that would overflow.

    A long robot dialogue outgrows the context window; instead of refusing the next turn, the
    dialogue restarts from its most recent tokens (at most half the window) followed by the new
    turn, the usual sliding-window behaviour of chat front ends. The caller checkpoints the
    conversation first, so a turn that then fails gets the full history back.

    A chat turn renders the whole conversation and keeps the KV cache up to the longest common
    prefix with it (:mod:`.chat`); a conversation is either a prompt or a chat conversation.
    """
    if (request.chat is not None) != conversation.is_chat and (conversation.state is not None or conversation.turns):
        kind = "messages" if conversation.is_chat else "prompt"
        raise InvalidRequestError(f"this session is a {kind} session: continue it with {kind}")
    if request.chat is not None:
        return _fit_chat_turn(engine, conversation, request)
    state = conversation.state
    turn = list(request.turn_ids)
    if state is None:
        return FittedTurn(engine.opening(turn))
    needed = len(turn) + request.max_new_tokens
    if len(state.token_ids) + needed <= engine.max_context:
        return FittedTurn(turn, reused_tokens=len(state.token_ids))
    wrapping = len(engine.special_prefix) + len(engine.special_suffix)
    keep = max(0, min(engine.max_context // 2, engine.max_context - needed - wrapping))
    tail = state.token_ids[len(state.token_ids) - keep:] if keep else []
    conversation.reset()
    return FittedTurn(engine.opening([*tail, *turn]), kept_tokens=keep)


def _fit_chat_turn(engine: SpeculativeEngine, conversation: Conversation, request: TurnRequest) -> FittedTurn:
    """Render the conversation with the turn; cut the cache back to what still agrees with it."""
    conversation.is_chat = True
    fitted = fit_chat(engine, conversation.messages, request.chat, request.max_new_tokens)
    kept = len(fitted.ids) if fitted.dropped else None
    state = conversation.state
    reuse = 0
    if state is not None:
        # At least one token is fed again: a turn starts by scoring its last input token.
        reuse = min(common_prefix(state.token_ids, fitted.ids), len(fitted.ids) - 1)
        if reuse == 0:
            conversation.state = None  # nothing in common: open a fresh decoding state
        else:
            state.rewind(reuse)
    return FittedTurn(fitted.ids[reuse:], kept_tokens=kept, messages=fitted.messages, reused_tokens=reuse)


def admit_workload_turn(engine: SpeculativeEngine, turn) -> TurnRequest:
    """A workload turn (:class:`~memspec_ros.runtime.traces.Turn`) admitted as the node admits a goal:
    its text, or (``chat``) its user message with its system prompt. Sending the system prompt on
    every turn renders the same conversation (:func:`memspec_ros.runtime.chat.merged` keeps one).
    Raises :class:`InvalidRequestError` with the reason when refused."""
    prompt = ChatTurn((ChatMessage("user", turn.prompt),), system_prompt=turn.system_prompt) if turn.chat \
        else turn.prompt
    admission = admit(engine, prompt, turn.max_new_tokens)
    if admission.request is None:
        raise InvalidRequestError(f"turn refused: {admission.problem}")
    return admission.request


def fit_user_message(engine: SpeculativeEngine, conversation: Conversation, turn) -> FittedTurn:
    """A workload's chat turn admitted and fitted to ``conversation`` (:func:`admit_workload_turn`)."""
    return fit_turn(engine, conversation, admit_workload_turn(engine, turn))


def answered(conversation: Conversation, fitted: FittedTurn, text: str) -> None:
    """Record the answer of a chat turn run outside the runtime: the history its next turn renders."""
    conversation.messages = [*fitted.messages, ChatMessage("assistant", text)]


def opening_ids(engine: SpeculativeEngine, turn) -> list[int]:
    """The tokens a workload turn opens a conversation with: its text encoded as the engine encodes
    a first prompt, or (a chat turn) its system prompt and user message rendered."""
    if not turn.chat:
        return engine.encode(turn.prompt)
    return list(admit_workload_turn(engine, turn).turn_ids)
