"""Goal checks (prompt or messages, defaults, stop strings, sampling), echoing of request text and the
callback guard: pure functions, no node, milliseconds."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from memspec_ros.core.errors import InvalidRequestError
from memspec_ros.core.sampling import MIN_TEMPERATURE, SamplingParams
from memspec_ros.ros.callback_guard import survive
from memspec_ros.ros.echo import ECHO_LIMIT, echo
from memspec_ros.ros.goal_validation import GoalLimits, goal_problem, max_new_tokens, sampling_params, turn_input
from memspec_ros.runtime.chat import ChatMessage, ChatTurn

LIMITS = GoalLimits(max_new_tokens=512, max_prompt_chars=8000, domains={"code", "legal"}, default_max_new_tokens=96)


def _goal(**fields) -> SimpleNamespace:
    base = dict(prompt="hello", messages=[], system_prompt="", max_new_tokens=8, temperature=0.0, top_p=1.0,
                top_k=0, seed=0, stop=[], domain_hint="", session_id="")
    return SimpleNamespace(**{**base, **fields})


def _msg(role: str, content: str) -> SimpleNamespace:
    return SimpleNamespace(role=role, content=content)


def _chat(*messages: SimpleNamespace, **fields) -> SimpleNamespace:
    return _goal(prompt="", messages=list(messages), **fields)


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
    ({"max_new_tokens": 513}, "max_new_tokens_limit"),
    ({"top_k": -1}, "top_k"),
    ({"stop": [""]}, "empty"),
    ({"stop": ["x" * 65]}, "characters"),
    ({"stop": ["a"] * 17}, "more than 16"),
    ({"stop": ["\x1b[2J"]}, "U+001B"),
    ({"system_prompt": "be brief"}, "system_prompt needs messages"),
    ({"messages": [_msg("user", "hi")]}, "both prompt and messages"),
    ({"prompt": ""}, "empty"),
    ({"domain_hint": "poetry"}, "unknown"),
    ({"session_id": "a b"}, "session_id"),
])
def test_bad_goals_are_rejected_with_a_reason(fields, needle) -> None:
    problem = goal_problem(_goal(**fields), LIMITS)
    assert problem is not None and needle in problem, problem


@pytest.mark.parametrize(("goal", "needle"), [
    (_chat(_msg("robot", "hi")), "role must be one of"),
    (_chat(_msg("user", "hi"), _msg("system", "late")), "only the first message"),
    (_chat(_msg("system", "a"), _msg("user", "hi"), system_prompt="b"), "send one of them"),
    (_chat(_msg("system", "only instructions")), "only a system prompt"),
    (_chat(_msg("user", "  ")), "every message is empty"),
    (_chat(_msg("user", "bell\x07")), "messages[0].content contains control character U+0007"),
    (_chat(_msg("user", "hi"), system_prompt="esc \x1b"), "system_prompt contains control character"),
    (_chat(_msg("user", "x" * 7000), system_prompt="y" * 1001), "max_prompt_chars"),
])
def test_bad_chat_goals_are_rejected_with_a_reason(goal, needle) -> None:
    problem = goal_problem(goal, LIMITS)
    assert problem is not None and needle in problem, problem


def test_a_chat_goal_becomes_a_chat_turn_and_a_prompt_stays_text() -> None:
    chat = _chat(_msg("user", "Go to the lab"), _msg("assistant", "Okay."), _msg("user", "Stop"),
                 system_prompt="You are a robot.", stop=["\nUSER:"])
    assert goal_problem(chat, LIMITS) is None
    turn = turn_input(chat)
    assert turn == ChatTurn((ChatMessage("user", "Go to the lab"), ChatMessage("assistant", "Okay."),
                             ChatMessage("user", "Stop")), "You are a robot.")
    assert turn_input(_goal(prompt="USER: hi\nROBOT:")) == "USER: hi\nROBOT:"


def test_defaults_mean_the_node_default_length_and_a_drawn_seed() -> None:
    """A default-constructed goal with only a prompt is valid: max_new_tokens 0 and seed 0 have meanings."""
    goal = _goal(max_new_tokens=0, seed=0)
    assert goal_problem(goal, LIMITS) is None
    assert max_new_tokens(goal, LIMITS) == LIMITS.default_max_new_tokens
    assert max_new_tokens(_goal(max_new_tokens=7), LIMITS) == 7
    assert sampling_params(goal).seed is None  # the runtime draws it and reports it
    assert sampling_params(_goal(seed=9, top_k=40, temperature=0.7)) == SamplingParams(0.7, 1.0, 9, 40)


def test_every_accepted_top_k_and_seed_is_one_sampling_params_accepts() -> None:
    """One rule for top_k and seed too: the goal check is SamplingParams' own validation."""
    for fields in ({"top_k": 0}, {"top_k": 50}, {"top_k": 2**31}, {"top_k": -3}, {"seed": 2**63 - 1},
                   {"seed": -1}, {"seed": 2**63}):
        accepted = goal_problem(_goal(temperature=1.0, **fields), LIMITS) is None
        seed = fields.get("seed", 1)
        try:
            SamplingParams(temperature=1.0, top_k=fields.get("top_k", 0), seed=seed if seed else None)
            constructs = True
        except InvalidRequestError:
            constructs = False
        assert accepted == constructs, fields


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
