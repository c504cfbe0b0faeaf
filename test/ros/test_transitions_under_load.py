"""Lifecycle transitions while the node is busy: a round stalled on a load, a load in flight.

One node start, emulated slow storage (0.3 MB/s, so a draft load takes several seconds) and a
one-draft budget:

1. ``policy: static`` on a draft that is not resident: the first round waits for its load
   (a stall). Deactivate during the stall, then cleanup while that load is still reading.
2. ``policy: memspec`` with a legal hint: the prefetch of the legal draft runs beside a
   generation. Deactivate mid-generation, then cleanup while the prefetch is still reading.

Each time the goal must end with a result that says why, each transition must finish well
inside ``deactivate_timeout_s`` (the stall wait and the generation honour the stop; past the
timeout the node would abort the goal and cleanup would refuse), and the node must serve
again after configure + activate: at the end its greedy output is still the target's.
"""

from __future__ import annotations

import threading
import time

from action_msgs.msg import GoalStatus
from memspec_interfaces.msg import DraftResidency, DraftState
from prompts import LEGAL_PROMPT, LONG_TOKENS, ROBOT_PROMPT
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient

from memspec_ros.bundled_models import bundled_zoo_root
from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess
from memspec_ros.ros.qos import RESIDENCY_LOG_QOS

BANDWIDTH_MBPS = 0.3
DEACTIVATE_TIMEOUT_S = 10.0
TRANSITION_LIMIT_S = DEACTIVATE_TIMEOUT_S / 2
"""A transition that waited out deactivate_timeout_s would take longer than this: finishing
inside it shows the running goal stopped on its own (with 5 s of slack for a busy machine;
the node's log must not report the timeout either)."""


def _load_seconds(draft: str) -> float:
    """How long a load of ``draft`` reads at the emulated bandwidth (stored bytes, MB = 1e6 B)."""
    return (bundled_zoo_root() / draft / "model.safetensors").stat().st_size / (BANDWIDTH_MBPS * 1e6)


class ResidencyLog:
    """Every residency snapshot the node publishes, and a wait for a draft's state."""

    def __init__(self, node) -> None:
        self._node = node
        self._msgs: list[DraftResidency] = []
        self._cond = threading.Condition()
        self._sub = node.create_subscription(DraftResidency, "/memspec/draft_residency", self._on_msg,
                                             RESIDENCY_LOG_QOS)

    def _on_msg(self, msg: DraftResidency) -> None:
        with self._cond:
            self._msgs.append(msg)
            self._cond.notify_all()

    def wait_for(self, draft: str, state: int, timeout_s: float = 30.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: any(
                d.name == draft and d.state == state for m in self._msgs for d in m.drafts), timeout_s)

    def destroy(self) -> None:
        self._node.destroy_subscription(self._sub)


def _timed(lc: LifecycleClient, transition: str) -> float:
    t0 = time.monotonic()
    assert lc.change_state(transition), transition
    return time.monotonic() - t0


def _set_policy(params: AsyncParameterClient, policy: str) -> None:
    assert params.wait_for_services(30.0)
    future = params.set_parameters([Parameter("policy", value=policy)])
    deadline = time.monotonic() + 30
    while not future.done() and time.monotonic() < deadline:
        time.sleep(0.02)  # the client node is spun by the fixture's executor thread
    result = future.result().results[0]
    assert result.successful, result.reason


def test_deactivate_and_cleanup_during_a_stall_and_a_load(client_node, params_file, zoo_engine) -> None:
    residency = ResidencyLog(client_node)
    node = NodeProcess(params_file, overrides={
        "autostart": True, "policy": "reactive", "static_draft": "draft-prose", "budget_drafts": 1,
        "storage_bandwidth_mbps": BANDWIDTH_MBPS, "load_timeout_s": 120.0,
        "deactivate_timeout_s": DEACTIVATE_TIMEOUT_S, "busy_policy": "queue",
    }).__enter__()
    try:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_state("active", alive=node.alive), node.log()
        gen = GenerateClient(client_node)
        assert gen.wait_for_server(30.0)
        params = AsyncParameterClient(client_node, "memspec")  # rclpy offers no destroy for it

        # 1. A round stalled on a load: static on a draft that is not resident waits for it.
        _set_policy(params, "static")
        stalled = gen.send(make_goal(ROBOT_PROMPT, 64))
        assert stalled.wait_accepted()
        assert residency.wait_for("draft-prose", DraftState.LOADING), node.log()
        demanded = time.monotonic()
        assert not stalled.feedback, "the first round ran: the static policy did not wait for its draft"
        deactivate_s = _timed(lc, "deactivate")
        result = stalled.wait(30)
        assert stalled.status == GoalStatus.STATUS_ABORTED, result.message
        assert result.message.startswith("aborted: the node was deactivated during generation"), result.message
        assert result.stall_seconds > 0.0 and result.num_tokens == 0  # the stop ended the stall: no round ran
        cleanup_s = _timed(lc, "cleanup")
        assert deactivate_s < TRANSITION_LIMIT_S and cleanup_s < TRANSITION_LIMIT_S, (deactivate_s, cleanup_s)
        assert time.monotonic() - demanded < _load_seconds("draft-prose"), \
            "the load could have finished: cleanup was not tested against a load in flight"
        assert "did not stop within deactivate_timeout_s" not in node.log()

        # 2. A prefetch in flight beside a running generation.
        _set_policy(params, "memspec")  # unconfigured: applies at configure
        assert lc.change_state("configure") and lc.change_state("activate"), node.log()
        running = gen.send(make_goal(LEGAL_PROMPT, LONG_TOKENS, domain_hint="legal"))
        assert running.wait_accepted()
        assert residency.wait_for("draft-legal", DraftState.LOADING), node.log()
        prefetched = time.monotonic()
        deadline = time.monotonic() + 30
        while not running.feedback and time.monotonic() < deadline:
            time.sleep(0.01)  # until it streams: generating, not waiting
        assert running.feedback and running.result is None, "the generation was not running at deactivate"
        deactivate_s = _timed(lc, "deactivate")
        result = running.wait(30)
        assert running.status == GoalStatus.STATUS_ABORTED, result.message
        assert result.message.startswith("aborted: the node was deactivated during generation (after "), \
            result.message
        assert 0 < result.num_tokens < LONG_TOKENS
        cleanup_s = _timed(lc, "cleanup")
        assert deactivate_s < TRANSITION_LIMIT_S and cleanup_s < TRANSITION_LIMIT_S, (deactivate_s, cleanup_s)
        assert time.monotonic() - prefetched < _load_seconds("draft-legal"), \
            "the prefetch could have finished: cleanup was not tested against a load in flight"
        assert "did not stop within deactivate_timeout_s" not in node.log()

        # 3. Serving again, losslessly.
        assert lc.change_state("configure") and lc.change_state("activate"), node.log()
        call = gen.generate(make_goal(ROBOT_PROMPT, 24), timeout_s=120)
        assert call.succeeded, call.result.message
        expected = zoo_engine.tokenizer.decode(zoo_engine.target_greedy(ROBOT_PROMPT, 24), skip_special_tokens=True,
                                               clean_up_tokenization_spaces=False)
        assert call.result.text == expected
        assert node.alive()
        gen.destroy()
    finally:
        node.stop()
        residency.destroy()

