"""Checks a Generate goal must pass before the node accepts it.

Rejecting at the goal callback (instead of failing mid-generation) gives the client an
immediate, specific reason and costs the node nothing: no tokens, no draft loads. Anything
this accepts must not fail at execute for the same reason, so sampling settings are checked
by constructing the very :class:`SamplingParams` the generation will use (one definition of
the rule), and every echoed field goes through :func:`echo`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from memspec_ros.core.errors import InvalidRequestError
from memspec_ros.core.sampling import SamplingParams
from memspec_ros.ros.echo import echo
from memspec_ros.runtime.chat import ChatMessage, ChatTurn, chat_problem
from memspec_ros.runtime.stop_strings import stop_problem

# C0 controls other than tab, newline and carriage return, DEL, and the C1 controls
# (U+0080-U+009F, e.g. U+009B, the one-character CSI of 8-bit terminals) have no place in a
# prompt, a message, a system prompt or a stop string, and are a classic way to smuggle
# terminal escapes into logs.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SESSION_ID = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")


class MessageFields(Protocol):
    """A ``memspec_interfaces/ChatMessage``."""

    role: str
    content: str


class GoalFields(Protocol):
    """The fields of a Generate goal this module reads (a ``Generate.Goal`` has them all)."""

    prompt: str
    messages: Sequence[MessageFields]
    system_prompt: str
    max_new_tokens: int
    temperature: float
    top_p: float
    top_k: int
    seed: int
    stop: Sequence[str]
    domain_hint: str
    session_id: str


@dataclass(frozen=True)
class GoalLimits:
    """Node-side limits a goal is checked against (from parameters)."""

    max_new_tokens: int
    max_prompt_chars: int
    domains: Collection[str]
    default_max_new_tokens: int
    """What ``max_new_tokens`` 0 (the field's default) means (parameter ``default_max_new_tokens``)."""


def sampling_params(goal: GoalFields) -> SamplingParams:
    """The goal's sampling settings; raises InvalidRequestError saying what to fix.

    Seed 0 on the wire means "draw one" (``None`` here; the runtime draws and reports it).
    """
    seed = int(goal.seed)
    return SamplingParams(temperature=float(goal.temperature), top_p=float(goal.top_p),
                          seed=seed if seed != 0 else None, top_k=int(goal.top_k))


def max_new_tokens(goal: GoalFields, limits: GoalLimits) -> int:
    """The goal's token limit: its own, or the node's default for 0."""
    return int(goal.max_new_tokens) or limits.default_max_new_tokens


def turn_input(goal: GoalFields) -> str | ChatTurn:
    """What the runtime admits: the prompt text, or the messages as a :class:`ChatTurn`."""
    if goal.messages:
        return ChatTurn(tuple(ChatMessage(m.role, m.content) for m in goal.messages), goal.system_prompt)
    return goal.prompt


def _text_problem(what: str, text: str) -> str | None:
    """Invalid UTF-8 or control characters in a text field."""
    if "\ufffd" in text:
        return f"{what} contains invalid UTF-8 (replacement characters): send valid UTF-8 text"
    bad = _CONTROL.search(text)
    if bad:
        return f"{what} contains control character U+{ord(bad.group()):04X} at index {bad.start()}: remove it"
    return None


def _input_problem(goal: GoalFields, limits: GoalLimits) -> str | None:
    """The prompt or the messages: exactly one of them, well-formed, within max_prompt_chars."""
    prompt, messages = goal.prompt, list(goal.messages)
    if prompt and messages:
        return "the goal has both prompt and messages: send either raw text (prompt) or messages, not both"
    if goal.system_prompt and not messages:
        return "system_prompt needs messages: with a raw prompt, put any instructions into the prompt"
    if not messages:
        if not prompt or not prompt.strip():
            return "prompt is empty: send the user's text (or messages)"
        texts = [("prompt", prompt)]
    else:
        problem = chat_problem(ChatTurn(tuple(ChatMessage(m.role, m.content) for m in messages), goal.system_prompt))
        if problem is not None:
            return problem
        if not any(m.content.strip() for m in messages):
            return "every message is empty: send the user's text"
        texts = [("system_prompt", goal.system_prompt), *((f"messages[{i}].content", m.content)
                                                           for i, m in enumerate(messages))]
    total = sum(len(text) for _, text in texts)
    if total > limits.max_prompt_chars:
        what = "prompt" if not messages else "messages and system_prompt"
        return (
            f"{what} has {total} characters, more than max_prompt_chars={limits.max_prompt_chars}: "
            "shorten it or raise the node parameter"
        )
    for what, text in texts:
        problem = _text_problem(what, text)
        if problem is not None:
            return problem
    return None


def goal_problem(goal: GoalFields, limits: GoalLimits) -> str | None:
    """Return why the goal must be rejected, or None when it is acceptable.

    Only cheap checks (no tokenizer, no chat template): the node runs them before its busy
    check, and renders messages and checks context-window fit (tokenisation) after it.
    """
    problem = _input_problem(goal, limits)
    if problem is not None:
        return problem
    if goal.max_new_tokens > limits.max_new_tokens:
        return (
            f"max_new_tokens={goal.max_new_tokens} exceeds the node's max_new_tokens_limit={limits.max_new_tokens}"
        )
    try:
        sampling_params(goal)
    except InvalidRequestError as exc:
        return f"{exc} (goal fields temperature, top_p, top_k, seed)"
    stops = list(goal.stop)
    problem = stop_problem(stops)
    if problem is not None:
        return problem
    for i, stop in enumerate(stops):
        problem = _text_problem(f"stop[{i}]", stop)
        if problem is not None:
            return problem
    if goal.domain_hint and goal.domain_hint not in limits.domains:
        return (
            f"domain_hint {echo(goal.domain_hint)} is unknown: use one of {sorted(limits.domains)} "
            "or leave it empty"
        )
    if goal.session_id and not _SESSION_ID.match(goal.session_id):
        return f"session_id {echo(goal.session_id)} must be 1-128 characters of letters, digits and _ . : / -"
    return None
