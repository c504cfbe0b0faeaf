"""``memspec_generate``'s options become the goal fields of the same names, and its chat loop
reads lines from any stream (no node, milliseconds)."""

from __future__ import annotations

import io

from memspec_interfaces.action import Generate

from memspec_ros.ros.chat_loop import ChatStreams, run_chat
from memspec_ros.ros.generate_cli import chat_mode, format_result, goal_from_args, parse_args
from memspec_ros.ros.generate_client import GenerationCall


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
    assert "finish_reason: stop" in shown and "seed: 42" in shown and "session" not in shown
    restarted = format_result(Generate.Result(session_started=True, session_restart_reason="expired"))
    assert "session started: expired" in restarted


def test_session_is_an_alias_and_chat_mode_needs_no_text() -> None:
    args = parse_args(["memspec_generate", "--chat", "--session", "kitchen"])
    assert args.session_id == "kitchen" and args.text is None and chat_mode(args, io.StringIO())

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert chat_mode(parse_args(["memspec_generate"]), Terminal())  # no text on a terminal: chat
    assert not chat_mode(parse_args(["memspec_generate"]), io.StringIO())  # a pipe needs --chat
    assert not chat_mode(parse_args(["memspec_generate", "hi"]), Terminal())
    goal = goal_from_args(parse_args(["memspec_generate", "--chat", "--system", "Be brief."]), "", text="Go",
                          system=False)
    assert [(m.role, m.content) for m in goal.messages] == [("user", "Go")] and goal.system_prompt == ""


class _FakeCall:
    """A goal that streams its answer in two deltas, or is cancelled by a Ctrl-C while it waits."""

    def __init__(self, text: str, on_text, interrupt: bool) -> None:
        self.text, self.on_text, self.interrupt, self.cancelled = text, on_text, interrupt, False

    def wait_accepted(self, timeout_s: float) -> bool:
        return self.text != "<rejected>"

    def wait(self, timeout_s: float) -> Generate.Result:
        half = len(self.text) // 2
        if not self.cancelled:
            self.on_text(self.text[:half])
            if self.interrupt:
                raise KeyboardInterrupt
            self.on_text(self.text[half:])
        return Generate.Result(text=self.text if not self.cancelled else self.text[:half], session_token="tok",
                               finish_reason="cancelled" if self.cancelled else "stop")

    def cancel(self) -> None:
        self.cancelled = True


class _FakeClient:
    def __init__(self) -> None:
        self.goals: list[tuple[str, bool]] = []

    def send(self, goal, on_text):
        text, first = goal
        self.goals.append((text, first))
        return _FakeCall(f"<{text}>", on_text, interrupt=text == "long")

    def describe_rejection(self, call) -> str:
        return "domain_hint 'x' is unknown"


def test_the_chat_loop_reads_a_pipe_cancels_on_ctrl_c_and_quits_at_the_end() -> None:
    client, out, err, tokens = _FakeClient(), io.StringIO(), io.StringIO(), []
    lines = io.StringIO("hello\n\n   \nlong\nbye\n")
    status = run_chat(client, lambda text, first: (text, first), ChatStreams(lines, out, err),
                      on_token=tokens.append)
    assert status == 0
    assert client.goals == [("hello", True), ("long", False), ("bye", False)], "blank lines are skipped"
    assert out.getvalue() == "<hello>\n<lo\n<bye>\n", "a cancelled answer keeps what streamed"
    assert "[cancelling]" in err.getvalue() and "[cancelled:" in err.getvalue()
    assert tokens == ["tok"] * 3
    # a rejected line says the node's reason, the exit status tells a script, the chat goes on
    client, err = _FakeClient(), io.StringIO()
    status = run_chat(client, lambda text, first: (text, first), ChatStreams(io.StringIO("rejected\nok\n"),
                                                                           io.StringIO(), err))
    assert status == 3 and "[goal rejected: domain_hint 'x' is unknown]" in err.getvalue()
    assert client.goals == [("rejected", True), ("ok", True)], "a rejected first line leaves the next one first"


def test_a_reader_of_the_stream_gets_the_whole_answer_when_the_last_feedback_is_late() -> None:
    """Feedback (a topic) and the result (a service response) travel apart: under load the
    result can arrive and the grace period end before the last deltas do. The call then tells
    the reader the missing tail from the result, and drops the deltas that arrive later."""
    told: list[str] = []
    call = GenerationCall(_on_text=told.append)
    call.FEEDBACK_GRACE_S = 0.01
    call.accepted = True
    call._responded.set()
    call._on_feedback(Generate.Feedback(delta=" Understood."))
    call._on_feedback(Generate.Feedback(delta=" Fetching the toolbox"))
    call._on_result(Generate.Result(text=" Understood. Fetching the toolbox from the office"), 4)
    assert call.wait(timeout_s=1.0).text == "".join(told)
    call._on_feedback(Generate.Feedback(delta=" from the office"))  # late: already told
    assert "".join(told) == " Understood. Fetching the toolbox from the office"
    assert told[-1] == " from the office" and len(told) == 3


def test_a_stream_that_caught_up_is_told_nothing_twice() -> None:
    told: list[str] = []
    call = GenerationCall(_on_text=told.append)
    call.accepted = True
    call._responded.set()
    call._on_feedback(Generate.Feedback(delta="abc"))
    call._on_result(Generate.Result(text="abc"), 4)
    call.wait(timeout_s=1.0)
    assert told == ["abc"]
