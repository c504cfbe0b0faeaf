"""Checks a Generate goal must pass before the node accepts it.

Rejecting at the goal callback (instead of failing mid-generation) gives the client an
immediate, specific reason and costs the node nothing: no tokens, no draft loads. Anything
this accepts must not fail at execute for the same reason, so sampling settings are checked
by constructing the very :class:`SamplingParams` the generation will use (one definition of
the rule), and every echoed field goes through :func:`echo`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from memspec_ros.core.errors import InvalidRequestError
from memspec_ros.core.sampling import SamplingParams
from memspec_ros.ros.echo import echo

# C0 controls other than tab, newline and carriage return, DEL, and the C1 controls
# (U+0080-U+009F, e.g. U+009B, the one-character CSI of 8-bit terminals) have no place in a
# prompt and are a classic way to smuggle terminal escapes into logs.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SESSION_ID = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")


class GoalFields(Protocol):
    """The fields of a Generate goal this module reads (a ``Generate.Goal`` has them all)."""

    prompt: str
    max_new_tokens: int
    temperature: float
    top_p: float
    seed: int
    domain_hint: str
    session_id: str


@dataclass(frozen=True)
class GoalLimits:
    """Node-side limits a goal is checked against (from parameters)."""

    max_new_tokens: int
    max_prompt_chars: int
    domains: Collection[str]


def sampling_params(goal: GoalFields) -> SamplingParams:
    """The goal's sampling settings; raises InvalidRequestError saying what to fix."""
    return SamplingParams(temperature=float(goal.temperature), top_p=float(goal.top_p), seed=int(goal.seed))


def goal_problem(goal: GoalFields, limits: GoalLimits) -> str | None:
    """Return why the goal must be rejected, or None when it is acceptable.

    Only cheap checks (no tokenizer): the node runs them before its busy check, and checks
    context-window fit (tokenisation) after it.
    """
    prompt = goal.prompt
    if not prompt or not prompt.strip():
        return "prompt is empty: send the user's text"
    if len(prompt) > limits.max_prompt_chars:
        return (
            f"prompt has {len(prompt)} characters, more than max_prompt_chars={limits.max_prompt_chars}: "
            "shorten it or raise the node parameter"
        )
    if "\ufffd" in prompt:
        return "prompt contains invalid UTF-8 (replacement characters): send valid UTF-8 text"
    bad = _CONTROL.search(prompt)
    if bad:
        return f"prompt contains control character U+{ord(bad.group()):04X} at index {bad.start()}: remove it"
    if goal.max_new_tokens < 1:
        return "max_new_tokens is 0: ask for at least 1 token"
    if goal.max_new_tokens > limits.max_new_tokens:
        return (
            f"max_new_tokens={goal.max_new_tokens} exceeds the node's max_new_tokens_limit={limits.max_new_tokens}"
        )
    try:
        sampling_params(goal)
    except InvalidRequestError as exc:
        return f"{exc} (goal fields temperature, top_p, seed)"
    if goal.domain_hint and goal.domain_hint not in limits.domains:
        return (
            f"domain_hint {echo(goal.domain_hint)} is unknown: use one of {sorted(limits.domains)} "
            "or leave it empty"
        )
    if goal.session_id and not _SESSION_ID.match(goal.session_id):
        return f"session_id {echo(goal.session_id)} must be 1-128 characters of letters, digits and _ . : / -"
    return None
