"""Issue 14 end to end, in one node start: callbacks survive, goals are rejected or answered,
sessions are owned and survive a failed turn, hints cannot flood, Ctrl-C answers running goals."""

from __future__ import annotations

import time

from prompts import LEGAL_PROMPT, LONG_TOKENS, ROBOT_PROMPT
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from std_msgs.msg import String

from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess


def _set_param(client_node, name: str, value: str | int):
    cli = client_node.create_client(SetParameters, "/memspec/set_parameters")
    try:
        assert cli.wait_for_service(timeout_sec=30.0)
        pv = (ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value) if isinstance(value, str)
              else ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=value))
        future = cli.call_async(SetParameters.Request(parameters=[Parameter(name=name, value=pv)]))
        deadline = time.monotonic() + 30
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.05)  # the client node is spun by the fixture's executor thread
        return future.result().results[0]
    finally:
        client_node.destroy_client(cli)


def test_node_survives_errors_keeps_sessions_and_answers_on_ctrl_c(client_node, params_file) -> None:
    hint_pub = client_node.create_publisher(String, "/memspec/context_hint", 100)
    node = NodeProcess(params_file, overrides={"autostart": True, "static_draft": "draft-nonexistent",
                                               "busy_policy": "queue"}).__enter__()
    try:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_state("active", alive=node.alive), node.log()
        gen = GenerateClient(client_node)
        assert gen.wait_for_server(30.0)

        # 1. A parameter change the new policy cannot serve is refused with a reason (was: KeyError, exit).
        res = _set_param(client_node, "policy", "static")
        assert not res.successful and "draft-nonexistent" in res.reason, res.reason
        assert node.alive()

        # 2. Goals that used to pass the check and fail at execute are rejected up front.
        for bad in (make_goal(ROBOT_PROMPT, 8, temperature=1e-40), make_goal(ROBOT_PROMPT, 8, seed=-1),
                    make_goal("csi \x9b2J", 8)):
            assert not gen.send(bad).wait_accepted()

        # 3. Sessions are owned: the token from the first result continues, a stranger is refused.
        first = gen.generate(make_goal(ROBOT_PROMPT, 8, session_id="kitchen"), timeout_s=120)
        assert first.succeeded and len(first.result.session_token) >= 32
        stranger = GenerateClient(client_node)  # destroyed at the end, not while goals are in flight
        assert not stranger.send(make_goal("\nUSER: what did I ask?\nROBOT:", 8, session_id="kitchen")).wait_accepted()

        # 4. A parameter change during a generation is accepted at once and applied only after
        # it ends (the running goal keeps the settings it started with). LEGAL_PROMPT runs 500
        # tokens without an end-of-sequence, so the goal is still running when the set returns.
        running = gen.send(make_goal(LEGAL_PROMPT, LONG_TOKENS))
        assert running.wait_accepted()
        deadline = time.monotonic() + 60
        while not running.feedback and time.monotonic() < deadline:
            time.sleep(0.01)  # until it streams
        assert _set_param(client_node, "check_interval", 2).successful
        assert running.result is None, "the goal ended before the change: the deferral is not tested"
        assert "run-time parameters applied" not in node.log(), "applied during the generation"
        running.cancel()
        assert running.wait(120).message.startswith("cancelled"), running.result.message
        assert running.result.finish_reason == "cancelled"
        deadline = time.monotonic() + 10
        while "run-time parameters applied" not in node.log() and time.monotonic() < deadline:
            time.sleep(0.05)  # the node logs it as the goal's bookkeeping ends
        assert "run-time parameters applied: {'check_interval': 2}" in node.log()

        # 5. A hint flood: escaped, throttled, and the node keeps serving. Paced over ~1.5 s so
        # the subscription (depth 10) takes nearly all of them: unthrottled, that is hundreds
        # of warnings; throttled to one a second, a handful.
        for i in range(300):
            hint_pub.publish(String(data=f"\x1b[2J\x9b{i}" + "B" * 5000))
            time.sleep(0.005)  # the flood's rate, not a wait for work
        again = gen.generate(make_goal("\nUSER: thanks\nROBOT:", 8, session_id="kitchen"), timeout_s=120)
        assert again.succeeded, node.log()
        log = node.log()
        assert "\x1b[2J" not in log and "\x9b" not in log and "B" * 100 not in log
        assert 1 <= log.count("context_hint") <= 10, f"{log.count('context_hint')} hint warnings: not throttled"

        # 6. Ctrl-C during a generation: the lifecycle shutdown runs and the goal gets a result.
        long_call = gen.send(make_goal(LEGAL_PROMPT, LONG_TOKENS))
        assert long_call.wait_accepted()
        deadline = time.monotonic() + 60
        while not long_call.feedback and time.monotonic() < deadline:
            time.sleep(0.05)  # wait until it is generating
        assert long_call.feedback, node.log()
        assert node.stop(timeout_s=30) == 0, node.log()
        result = long_call.wait(30)
        assert "shutting down" in result.message, result.message
        assert result.finish_reason == "deactivated", result.finish_reason
        assert "running the lifecycle shutdown" in node.log() and "shut down from state 'active'" in node.log()
        gen.destroy()
        stranger.destroy()
    finally:
        node.stop()
        client_node.destroy_publisher(hint_pub)
