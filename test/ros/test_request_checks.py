"""Goal checks, echoing of request text and the callback guard: pure functions, no node, milliseconds."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from memspec_ros.core.errors import InvalidRequestError
from memspec_ros.core.sampling import MIN_TEMPERATURE, SamplingParams
from memspec_ros.ros.callback_guard import survive
from memspec_ros.ros.echo import ECHO_LIMIT, echo
from memspec_ros.ros.goal_validation import GoalLimits, goal_problem, sampling_params

LIMITS = GoalLimits(max_new_tokens=512, max_prompt_chars=8000, domains={"code", "legal"})


def _goal(**fields) -> SimpleNamespace:
    base = dict(prompt="hello", max_new_tokens=8, temperature=0.0, top_p=1.0, seed=0, domain_hint="",
                session_id="")
    return SimpleNamespace(**{**base, **fields})


def test_a_valid_goal_passes_and_its_sampling_params_construct() -> None:
    for goal in (_goal(), _goal(temperature=0.7, top_p=0.9, seed=3, domain_hint="code", session_id="a-1")):
        assert goal_problem(goal, LIMITS) is None
        sampling_params(goal)  # what execute builds: must not raise for an accepted goal


@pytest.mark.parametrize(("fields", "needle"), [
    ({"temperature": 1e-40}, "minimum"),             # used to pass and produce NaN at execute
    ({"temperature": MIN_TEMPERATURE / 2}, "use 0 for greedy"),
    ({"temperature": float("nan")}, "temperature"),
    ({"temperature": -0.5}, "temperature"),
    ({"seed": -1}, "seed"),                           # used to pass and abort at execute
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": float("inf")}, "top_p"),
    ({"prompt": "csi \x9b2J"}, "U+009B"),              # C1 control (8-bit CSI)
    ({"prompt": "esc \x1b[2J"}, "U+001B"),
    ({"prompt": "nul \x00"}, "U+0000"),
    ({"prompt": "x" * 8001}, "max_prompt_chars"),
    ({"prompt": "  "}, "empty"),
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"max_new_tokens": 513}, "max_new_tokens_limit"),
    ({"domain_hint": "poetry"}, "unknown"),
    ({"session_id": "a b"}, "session_id"),
])
def test_bad_goals_are_rejected_with_a_reason(fields, needle) -> None:
    problem = goal_problem(_goal(**fields), LIMITS)
    assert problem is not None and needle in problem, problem


def test_every_accepted_temperature_is_one_sampling_params_accepts() -> None:
    """One rule: the goal check is SamplingParams' own validation."""
    for t in (0.0, MIN_TEMPERATURE, 0.5, 2.0, 1e-40, -1.0, MIN_TEMPERATURE * 0.999):
        accepted = goal_problem(_goal(temperature=t), LIMITS) is None
        try:
            SamplingParams(temperature=t)
            constructs = True
        except InvalidRequestError:
            constructs = False
        assert accepted == constructs, t


def test_hostile_text_is_echoed_escaped_and_bounded() -> None:
    hostile = "\x1b[2J\x9b31m" + "A" * 10_000 + "\nFAKE LOG LINE"
    problem = goal_problem(_goal(domain_hint=hostile), LIMITS)
    assert problem is not None
    assert "\x1b" not in problem and "\x9b" not in problem and "\n" not in problem
    assert len(problem) < 400 and f"({len(hostile)} characters)" in problem
    shown = echo(hostile)
    assert shown.startswith("'\\x1b[2J\\x9b31m") and len(shown) < ECHO_LIMIT * 4 + 40
    assert echo("code") == "'code'"


def test_survive_logs_and_returns_the_fallback() -> None:
    logged: list[str] = []
    logger = SimpleNamespace(error=logged.append)

    def callback(x: int) -> int:
        return {1: 10}[x]  # KeyError for anything else, like the static-policy parameter bug

    guarded = survive(callback, logger, "parameter change", lambda exc: f"refused: {type(exc).__name__}")
    assert guarded(1) == 10 and logged == []
    assert guarded(2) == "refused: KeyError"
    assert len(logged) == 1 and "parameter change failed" in logged[0] and "KeyError" in logged[0]
    assert survive(callback, logger, "timer")(3) is None


def test_survive_does_not_swallow_process_exits() -> None:
    def leave() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        survive(leave, logging.getLogger("t"), "x")()
