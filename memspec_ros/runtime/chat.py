"""Chat turns: role-tagged messages rendered with the target tokenizer's chat template.

A robot's dialogue manager thinks in messages (a system prompt, what the user said, what the
robot answered), not in the text format one particular model was trained on. The target's
tokenizer carries that format as a chat template (``tokenizer.apply_chat_template``), so the
same client code works with any model that has one.

Sessions render incrementally, without re-encoding their history. The conversation keeps its
messages (its own answers included) and the tokens the target has in its KV cache. A new turn
renders *every* message with the generation prompt, tokenises that, and keeps the cached
tokens up to the longest common prefix with it (:func:`common_prefix`); only the rest is
prefilled. Normally the cached tokens are a prefix of the new rendering, so only the new
messages are encoded. When they are not, the cache is cut back to where the two agree (the
fall-back, never an error), so the target always sees exactly the rendering of the whole
conversation, as if a stateless client had sent all of it. That happens when:

* the template renders history differently once more messages follow (some templates drop
  earlier reasoning, or put the system prompt elsewhere);
* the target's own answer was not tokenised the way the tokenizer would tokenise its text
  (sampled or greedy output may use a non-canonical split), or ended in an end-of-sequence
  token the template does not render;
* the system prompt changed, or the dialogue was shortened to fit the context window
  (:func:`fit_chat`: the oldest exchanges are dropped, the system prompt is kept).

Each case costs a re-prefill of the part after the divergence, never correctness.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.errors import InvalidRequestError

ROLES = ("system", "user", "assistant")
"""Roles a message may have. Chat templates agree on these three; others (tool, ipython, ...)
differ between templates and are refused, so a goal never fails half-way in the template."""


@dataclass(frozen=True)
class ChatMessage:
    """One message: who said it and what."""

    role: str
    content: str


@dataclass(frozen=True)
class ChatTurn:
    """A turn's input as messages: the new messages, and the system prompt if the goal set one."""

    messages: tuple[ChatMessage, ...]
    system_prompt: str = ""


def chat_problem(turn: ChatTurn) -> str | None:
    """Why ``turn`` cannot be rendered, or None (cheap: no template, no tokens)."""
    if not turn.messages:
        return "messages is empty: send at least one message"
    for i, message in enumerate(turn.messages):
        if message.role not in ROLES:
            return f"messages[{i}].role must be one of {', '.join(ROLES)}"
        if message.role == "system" and i > 0:
            return f"messages[{i}] has role system: only the first message may (or use system_prompt)"
        if message.role == "system" and turn.system_prompt:
            return "messages[0] has role system and system_prompt is set too: send one of them"
    if all(m.role == "system" for m in turn.messages):
        return "messages hold only a system prompt: add the user's message"
    return None


def merged(history: Sequence[ChatMessage], turn: ChatTurn) -> list[ChatMessage]:
    """The conversation after ``turn``: history, then the turn's messages.

    A system prompt in the turn (``system_prompt`` or a leading system message) replaces the
    conversation's; otherwise the conversation keeps the one it has.
    """
    new = list(turn.messages)
    system = ChatMessage("system", turn.system_prompt) if turn.system_prompt else None
    if new and new[0].role == "system":
        system = new.pop(0)
    rest = [m for m in history if m.role != "system"]
    if system is None:
        system = next((m for m in history if m.role == "system"), None)
    return [*([system] if system is not None else []), *rest, *new]


def render_ids(engine: SpeculativeEngine, messages: Sequence[ChatMessage]) -> list[int]:
    """Token ids of ``messages`` rendered with the target's chat template, generation prompt appended.

    Tokenised without the tokenizer's special tokens: a chat template writes the ones it wants
    (a BOS) itself. Raises :class:`InvalidRequestError` when the tokenizer has no template or
    the template refuses the messages.
    """
    tokenizer = engine.tokenizer
    if not getattr(tokenizer, "chat_template", None):
        raise InvalidRequestError("the target's tokenizer has no chat template: send prompt instead of messages")
    try:
        text = tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in messages],
                                             tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # jinja's TemplateError, or raise_exception() inside the template
        raise InvalidRequestError(f"the target's chat template refused the messages: {exc}") from exc
    return engine.encode(text, add_special_tokens=False)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass(frozen=True)
class FittedChat:
    """A chat turn fitted to its conversation: what to render, and how much cache to keep."""

    messages: tuple[ChatMessage, ...]
    """The conversation the turn renders (oldest messages dropped if it had to shrink)."""
    ids: list[int]
    """``messages`` rendered and tokenised, generation prompt included."""
    dropped: int = 0
    """Messages dropped from the start of the history to fit the context window."""


def fit_chat(engine: SpeculativeEngine, history: Sequence[ChatMessage], turn: ChatTurn,
             max_new_tokens: int) -> FittedChat:
    """Render the conversation after ``turn``, dropping its oldest exchanges until it fits.

    The system prompt and the turn's own messages are always kept. History is cut on exchange
    boundaries: an exchange is a user message and the messages that answer it, so the kept
    history starts with a user message, never with an answer whose question was dropped (the
    model would continue a dialogue that never happened).

    Once a conversation has to slide, it slides to at most half the window (as a prompt session
    does, :func:`~memspec_ros.runtime.turns.fit_turn`) unless the kept turn alone is longer:
    cutting just enough to fit would slide again on the very next turn, and every slide
    re-renders and re-prefills the whole kept history (its tokens shift). A turn that does not
    fit even with no history raises :class:`InvalidRequestError` (admission checked the turn
    alone, but a session's system prompt may have made it longer).
    """
    messages = merged(history, turn)
    system = 1 if messages and messages[0].role == "system" else 0
    droppable = len(messages) - system - len(turn.messages) + (1 if turn.messages[0].role == "system" else 0)
    fits = engine.max_context - max_new_tokens
    dropped = 0
    ids = render_ids(engine, messages)
    if len(ids) > fits:
        target = min(fits, engine.max_context // 2)
        while len(ids) > target and dropped < droppable:
            n = 1  # the oldest exchange: its first message and everything up to the next user message
            while dropped + n < droppable and messages[system + n].role != "user":
                n += 1
            del messages[system:system + n]
            dropped += n
            ids = render_ids(engine, messages)
    engine.check_budget(0, len(ids), max_new_tokens)
    return FittedChat(tuple(messages), ids, dropped)
