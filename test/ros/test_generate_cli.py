"""``memspec_generate``'s options become the goal fields of the same names (no node, milliseconds)."""

from __future__ import annotations

from memspec_interfaces.action import Generate

from memspec_ros.ros.generate_cli import format_result, goal_from_args, parse_args


def test_text_is_a_user_message_with_system_prompt_stops_and_sampling() -> None:
    args = parse_args(["memspec_generate", "Bring me the cup", "--system", "You are a robot.", "--stop", "\nUSER:",
                       "--stop", "[cmd]", "--top-k", "40", "--top-p", "0.9", "--temperature", "0.7", "--seed", "5",
                       "--session-id", "kitchen", "--ros-args", "-r", "__ns:=/robot1"])
    goal = goal_from_args(args, "tok")
    assert goal.prompt == "" and [(m.role, m.content) for m in goal.messages] == [("user", "Bring me the cup")]
    assert goal.system_prompt == "You are a robot." and list(goal.stop) == ["\nUSER:", "[cmd]"]
    assert (goal.top_k, goal.seed, goal.session_id, goal.session_token) == (40, 5, "kitchen", "tok")
    assert abs(goal.top_p - 0.9) < 1e-6 and abs(goal.temperature - 0.7) < 1e-6


def test_raw_sends_a_prompt_and_the_defaults_are_the_interfaces() -> None:
    goal = goal_from_args(parse_args(["memspec_generate", "USER: hi\nROBOT:", "--raw"]), "")
    assert goal.prompt == "USER: hi\nROBOT:" and not goal.messages
    assert (goal.max_new_tokens, goal.top_k, goal.seed) == (0, 0, 0) and goal.top_p == 1.0


def test_the_result_shows_why_it_ended_and_the_seed() -> None:
    shown = format_result(Generate.Result(text="Okay.", finish_reason="stop", seed=42, message="ok (stop)"))
    assert "finish_reason: stop" in shown and "seed: 42" in shown
