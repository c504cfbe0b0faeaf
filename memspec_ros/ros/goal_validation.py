"""Checks a Generate goal must pass before the node accepts it.

Rejecting at the goal callback (instead of failing mid-generation) gives the client an
immediate, specific reason and costs the node nothing: no tokens, no draft loads.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass

# Control characters other than tab, newline and carriage return have no place in a prompt
# and are a classic way to smuggle terminal escapes into logs.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SESSION_ID = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")


@dataclass(frozen=True)
class GoalLimits:
    """Node-side limits a goal is checked against (from parameters)."""

    max_new_tokens: int
    max_prompt_chars: int
    domains: Collection[str]


def goal_problem(
    prompt: str,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    domain_hint: str,
    session_id: str,
    limits: GoalLimits,
) -> str | None:
    """Return why the goal must be rejected, or None when it is acceptable.

    Context-window fit needs the tokenizer and the session, so the node checks it after this.
    """
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
    if max_new_tokens < 1:
        return "max_new_tokens is 0: ask for at least 1 token"
    if max_new_tokens > limits.max_new_tokens:
        return (
            f"max_new_tokens={max_new_tokens} exceeds the node's max_new_tokens_limit={limits.max_new_tokens}"
        )
    if not math.isfinite(temperature) or temperature < 0:
        return f"temperature={temperature} is invalid: use 0 for greedy or a finite value > 0 for sampling"
    if not math.isfinite(top_p) or not 0.0 < top_p <= 1.0:
        return f"top_p={top_p} is outside (0, 1]: use 1.0 for no nucleus truncation"
    if domain_hint and domain_hint not in limits.domains:
        return f"domain_hint '{domain_hint}' is unknown: use one of {sorted(limits.domains)} or leave it empty"
    if session_id and not _SESSION_ID.match(session_id):
        return "session_id must be 1-128 characters of letters, digits and _ . : / -"
    return None
