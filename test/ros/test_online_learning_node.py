"""Online learning in the node: a step after each turn, state beside the sessions, reset, restart.

A real node process over LOCALHOST DDS with a session folder of its own. The learning itself
(guard, masking, the teacher-forced labels) is tested in ``test/runtime/test_online_learning.py``;
here: that the node runs it in idle time, saves and continues it, resets it on request and
skips a damaged file with a warning.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray
from memspec_interfaces.srv import ResetLearning
from prompts import CODE_PROMPT, ROBOT_PROMPT

from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess
from memspec_ros.runtime.online_state import FILE_NAME


def _learning_status(diags: list[DiagnosticArray]) -> str | None:
    for msg in reversed(diags):
        for status in msg.status:
            for kv in status.values:
                if kv.key == "online_learning":
                    return kv.value
    return None


def _examples(status: str | None) -> int:
    return int(status.split(": ")[1].split(" ")[0]) if status and status.startswith("on:") else 0


def _wait(predicate, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _call(client, request, timeout_s: float = 30.0):
    assert client.wait_for_service(timeout_sec=timeout_s)
    future = client.call_async(request)
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout_s), "service did not answer"
    return future.result()


def test_the_node_learns_after_turns_saves_resets_and_continues(client_node, params_file, tmp_path: Path) -> None:
    diags: list[DiagnosticArray] = []
    sub = client_node.create_subscription(DiagnosticArray, "/diagnostics", diags.append, 50)
    overrides = {"autostart": True, "session_dir": str(tmp_path), "diagnostics_period_s": 0.1}
    reset = client_node.create_client(ResetLearning, "/memspec/reset_learning")
    try:
        with NodeProcess(params_file, overrides=overrides) as node:
            assert LifecycleClient(client_node).wait_for_state("active", 180.0, alive=node.alive), node.log()
            gen = GenerateClient(client_node)
            assert gen.wait_for_server(30.0)
            for prompt in (ROBOT_PROMPT, CODE_PROMPT):
                call = gen.generate(make_goal(prompt, 48), timeout_s=120)
                assert call.succeeded, node.log()
            assert _wait(lambda: _examples(_learning_status(diags)) > 0), (_learning_status(diags), node.log())
            saved = list(tmp_path.rglob(FILE_NAME))
            assert len(saved) == 1, list(tmp_path.rglob("*"))
            learned = _examples(_learning_status(diags))
            gen.destroy()
        assert "not a session file" not in node.log(), "the learned state is not a stray session file"

        diags.clear()
        with NodeProcess(params_file, overrides=overrides) as node:
            assert LifecycleClient(client_node).wait_for_state("active", 180.0, alive=node.alive), node.log()
            assert f"online learning: continuing from {saved[0]} ({learned} examples)" in node.log(), node.log()
            assert _wait(lambda: _examples(_learning_status(diags)) == learned)
            answer = _call(reset, ResetLearning.Request())
            assert answer.success and "shipped weights" in answer.message, answer.message
            assert not saved[0].exists()
            assert _wait(lambda: (_learning_status(diags) or "").startswith("on: 0 examples"))

        saved[0].write_bytes(b"not a safetensors file")
        with NodeProcess(params_file, overrides=overrides) as node:
            assert LifecycleClient(client_node).wait_for_state("active", 180.0, alive=node.alive), node.log()
            assert "is not readable learned state" in node.log(), node.log()
            gen = GenerateClient(client_node)
            assert gen.wait_for_server(30.0)
            assert gen.generate(make_goal(ROBOT_PROMPT, 16), timeout_s=120).succeeded, "it serves on"
            gen.destroy()

        with NodeProcess(params_file, overrides={**overrides, "online_learning": False}) as node:
            assert LifecycleClient(client_node).wait_for_state("active", 180.0, alive=node.alive), node.log()
            answer = _call(reset, ResetLearning.Request())
            assert not answer.success and "online learning is off" in answer.message
    finally:
        client_node.destroy_client(reset)
        client_node.destroy_subscription(sub)
