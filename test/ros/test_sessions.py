"""Sessions over real DDS: the reset/close/list services with ownership, the chat CLI over a pipe,
and durability: a node killed with SIGKILL mid-turn, restarted on the same session_dir,
continues each session from its last completed turn exactly as an uninterrupted node would.

Two node starts for the whole module: the first node serves the services and CLI tests and
is then killed; the second one is its restart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompts import ROBOT_PROMPT
from rclpy.node import Node

from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess
from memspec_ros.ros.session_client import SessionClient
from memspec_ros.ros.session_files import file_name
from memspec_ros.runtime.chat import ChatMessage as Message
from memspec_ros.runtime.chat import ChatTurn, merged, render_ids

REPO = Path(__file__).resolve().parents[2]
SYSTEM, STOP = "You are a helpful indoor service robot.", ["\nUSER:"]


def _start(params_file: Path, session_dir: Path, client_node: Node) -> NodeProcess:
    node = NodeProcess(params_file, overrides={"autostart": True, "session_dir": str(session_dir)}).__enter__()
    assert LifecycleClient(client_node).wait_for_state("active", alive=node.alive), node.log()
    return node


@pytest.fixture(scope="module")
def first(client_node: Node, params_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The first node, on a fresh session_dir; the last test kills it."""
    session_dir = tmp_path_factory.mktemp("sessions")
    node = _start(params_file, session_dir, client_node)
    gen = GenerateClient(client_node)
    sessions = SessionClient(client_node, tokens=gen.session_tokens)
    assert gen.wait_for_server(30.0) and sessions.wait_for_services(), node.log()
    domain = f"domain_{int(os.environ.get('ROS_DOMAIN_ID') or 0)}"
    try:  # "dir": where node /memspec keeps its files (a folder per ROS domain and node name)
        yield {"node": node, "gen": gen, "sessions": sessions, "base": session_dir,
               "dir": session_dir / domain / "memspec", "params": params_file}
    finally:
        sessions.destroy()
        gen.destroy()
        node.stop()


def _chat(gen: GenerateClient, sid: str, user: str, n: int = 32, system: str = ""):
    call = gen.generate(make_goal(messages=[("user", user)], system_prompt=system, stop=STOP, max_new_tokens=n,
                                  session_id=sid), timeout_s=120)
    assert call.succeeded, call.result
    return call.result


def test_reset_close_and_list_belong_to_the_owner(first) -> None:
    gen, node, sessions = first["gen"], first["node"], first["sessions"]
    opened = _chat(gen, "owned", "Go to the kitchen", 16, SYSTEM)
    assert opened.session_started and opened.session_restart_reason == ""
    token = opened.session_token
    assert (first["dir"] / file_name("owned")).exists(), "written after the completed turn"
    again = _chat(gen, "owned", "Now the lab", 8)
    assert not again.session_started

    listed = sessions.list()
    [info] = [s for s in listed if s.session_id == "owned"]
    assert (info.kind, info.turns, info.busy, info.durable) == ("chat", 2, False, True) and info.tokens > 10
    assert abs(info.last_used.sec - time.time()) < 120
    assert token not in str(listed)

    for refused in (sessions.reset("owned", "guess"), sessions.close("owned", "")):
        assert not refused.success and "belongs to another client" in refused.message, refused.message
    unknown = sessions.reset("never", token)
    assert not unknown.success and "no session" in unknown.message

    reset = sessions.reset("owned")  # the token GenerateClient remembered
    assert reset.success, reset.message
    after_reset = _chat(gen, "owned", "Go to the kitchen", 16, SYSTEM)
    assert after_reset.session_started and after_reset.session_restart_reason == "reset"
    assert after_reset.text == opened.text, "a reset session starts from nothing, as a new one does"
    assert after_reset.session_token == token, "a reset keeps the token"

    closed = sessions.close("owned")
    assert closed.success, closed.message
    assert not (first["dir"] / file_name("owned")).exists(), "closing deletes the file"
    assert "owned" not in [s.session_id for s in sessions.list()]
    back = _chat(gen, "owned", "Go to the kitchen", 8)  # the client still sends the old token
    assert back.session_started and back.session_restart_reason == "closed" and back.session_token != token
    assert node.alive()


class _Reader:
    """Collects a child's output in a thread, so a test can wait for text while it runs."""

    def __init__(self, stream) -> None:
        self.text = ""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream) -> None:
        for chunk in iter(lambda: stream.read1(256), b""):
            with self._lock:
                self.text += chunk.decode(errors="replace")

    def wait_for(self, predicate, timeout_s: float = 120.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if predicate(self.text):
                    return True
            time.sleep(0.05)  # the reader thread fills the buffer
        return False


def test_cli_chat_over_a_pipe_streams_cancels_and_keeps_the_session(first, zoo_engine, tmp_path) -> None:
    """Lines in, answers out; Ctrl-C (SIGINT) during an answer cancels that goal only, and the
    next line continues the same session (its answer is the target's greedy continuation of
    the whole conversation, the cancelled answer's text included). No stop string: the zoo's
    target answers "Go to the kitchen" with 200 tokens of dialogue, so the first answer is
    surely still streaming when the Ctrl-C arrives."""
    lines = ("Go to the kitchen", "Bring it to the office")
    cmd = [sys.executable, "-m", "memspec_ros.ros.generate_cli", "--chat", "--session", "cli-chat",
           "--system", SYSTEM, "--max-new-tokens", "100"]
    env = {**os.environ, "ROS_HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    out, err = _Reader(proc.stdout), _Reader(proc.stderr)
    try:
        assert err.wait_for(lambda t: "[session cli-chat" in t), err.text
        proc.stdin.write(f"{lines[0]}\n".encode())
        proc.stdin.flush()
        assert out.wait_for(lambda t: len(t.strip()) > 0), err.text
        proc.send_signal(signal.SIGINT)
        assert err.wait_for(lambda t: "tokens/s]" in t), err.text
        time.sleep(0.5)  # stdout was flushed before that status line; let its reader thread catch up
        first_answer = out.text[:-1]  # the loop ends each answer with a newline
        proc.stdin.write(f"\n{lines[1]}\n".encode())  # an empty line is skipped
        proc.stdin.flush()
        assert err.wait_for(lambda t: t.count("tokens/s]") == 2), err.text
        proc.stdin.close()  # end of input: quit
        assert proc.wait(60) == 0, err.text
        time.sleep(0.5)  # the reader threads drain the pipes
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "[cancelling]" in err.text and "[cancelled:" in err.text, err.text
    assert out.text.startswith(first_answer + "\n") and out.text.endswith("\n"), out.text
    second = out.text[len(first_answer) + 1:-1]
    history = [*merged([], ChatTurn((Message("user", lines[0]),), SYSTEM)), Message("assistant", first_answer)]
    rendered = render_ids(zoo_engine, merged(history, ChatTurn((Message("user", lines[1]),))))
    assert second == zoo_engine.tokenizer.decode(zoo_engine.target_greedy(rendered, 100), skip_special_tokens=True,
                                                 clean_up_tokenization_spaces=False)
    assert (tmp_path / "memspec_session_tokens.json").exists(), "a named session's token is remembered"


def test_sigkill_mid_turn_loses_only_that_turn(first, client_node, zoo_engine) -> None:
    gen, node, session_dir = first["gen"], first["node"], first["dir"]
    assert [p.relative_to(first["base"]) for p in first["base"].glob("*/*")] == [session_dir.relative_to(first["base"])]
    # A chat session and a prompt session, two completed turns each.
    users = ("Pick up the red cup", "Go to the kitchen", "Bring it to the office")
    history: list[Message] = []
    for i, user in enumerate(users[:2]):
        turn = ChatTurn((Message("user", user),), SYSTEM if i == 0 else "")
        answer = _chat(gen, "durable-chat", user, 24, turn.system_prompt).text
        history = [*merged(history, turn), Message("assistant", answer)]
    prompts = (ROBOT_PROMPT, "\nUSER: Now go to the lab\nROBOT:", "\nUSER: Thanks, and the garage?\nROBOT:")
    for p in prompts[:2]:
        assert gen.generate(make_goal(p, 24, session_id="durable-prompt"), timeout_s=120).succeeded
    # The uninterrupted prompt session, by the engine itself (greedy: the node's output is the target's).
    state = None
    for p in prompts[:2]:
        state = zoo_engine.run_turn(state, p, 24)
    state = zoo_engine.run_turn(state, prompts[2], 24)
    expected_prompt = state.text()

    # Kill the node while a third chat turn generates: no result, no file update.
    before = (session_dir / file_name("durable-chat")).read_bytes()
    running = gen.send(make_goal(messages=[("user", users[2])], max_new_tokens=400, session_id="durable-chat"))
    assert running.wait_accepted()
    deadline = time.monotonic() + 60
    while len(running.feedback) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # until it streams
    assert running.feedback and running.result is None, running.result
    assert node.kill() == -signal.SIGKILL
    assert (session_dir / file_name("durable-chat")).read_bytes() == before
    (session_dir / file_name("garbage")).write_text("{ not json")  # and one corrupt file

    restarted = _start(first["params"], first["base"], client_node)
    try:
        log = restarted.log()
        assert f"session file {session_dir / file_name('garbage')} skipped" in log, log
        listed = {s.session_id: s for s in first["sessions"].list()}
        assert listed["durable-chat"].turns == 2 and listed["durable-prompt"].turns == 2, listed
        gen2 = GenerateClient(client_node)
        gen2.session_tokens.update(gen.session_tokens)  # the same client, reconnecting
        assert gen2.wait_for_server(30.0)
        stranger = gen2.send(make_goal(messages=[("user", "hi")], session_id="durable-chat",
                                       session_token="not-the-token"))
        assert not stranger.wait_accepted(), "ownership survives the restart"
        call = gen2.generate(make_goal(messages=[("user", users[2])], stop=STOP, max_new_tokens=40,
                                       session_id="durable-chat"), timeout_s=120)
        assert call.succeeded and not call.result.session_started, call.result
        rendered = render_ids(zoo_engine, merged(history, ChatTurn((Message("user", users[2]),))))
        greedy = zoo_engine.tokenizer.decode(zoo_engine.target_greedy(rendered, 40), skip_special_tokens=True,
                                             clean_up_tokenization_spaces=False)
        assert call.result.text == greedy.split(STOP[0])[0]
        call = gen2.generate(make_goal(prompts[2], 24, session_id="durable-prompt"), timeout_s=120)
        assert call.succeeded and call.result.text == expected_prompt, (call.result.text, expected_prompt)
        gen2.destroy()
    finally:
        restarted.stop()
