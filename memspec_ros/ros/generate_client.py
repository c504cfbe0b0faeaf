"""A blocking client for the node's Generate action, for programs and tests.

Wraps rclpy's ActionClient futures in a small synchronous API: ``send`` returns a
:class:`GenerationCall` that collects feedback as it streams and can be waited on or
cancelled. The client node must be spun by an executor in another thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from action_msgs.msg import GoalStatus
from memspec_interfaces.action import Generate
from rclpy.action import ActionClient
from rclpy.node import Node

from memspec_ros.ros.qos import FEEDBACK_QOS, GOAL_SERVICE_QOS


def make_goal(
    prompt: str,
    max_new_tokens: int = 64,
    *,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int = 0,
    domain_hint: str = "",
    session_id: str = "",
) -> Generate.Goal:
    """A Generate goal with sensible defaults (greedy, no nucleus truncation)."""
    return Generate.Goal(
        prompt=prompt,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        seed=seed,
        domain_hint=domain_hint,
        session_id=session_id,
    )


@dataclass
class GenerationCall:
    """One goal in flight: acceptance, streamed feedback and the final result."""

    accepted: bool | None = None
    feedback: list[Generate.Feedback] = field(default_factory=list)
    result: Generate.Result | None = None
    status: int = GoalStatus.STATUS_UNKNOWN
    _handle: object | None = None
    _responded: threading.Event = field(default_factory=threading.Event)
    _finished: threading.Event = field(default_factory=threading.Event)

    def wait_accepted(self, timeout_s: float = 30.0) -> bool:
        """Wait for the server's accept/reject answer; True if accepted."""
        if not self._responded.wait(timeout_s):
            raise TimeoutError("the action server did not answer the goal request")
        return bool(self.accepted)

    def wait(self, timeout_s: float = 300.0) -> Generate.Result:
        """Wait for the result of an accepted goal."""
        if not self.wait_accepted(timeout_s):
            raise RuntimeError("goal was rejected")
        if not self._finished.wait(timeout_s):
            raise TimeoutError(f"no result within {timeout_s:.0f} s")
        assert self.result is not None
        return self.result

    def cancel(self) -> None:
        """Ask the server to cancel this goal (it stops within one speculative round)."""
        if self._handle is not None:
            self._handle.cancel_goal_async()

    @property
    def streamed_text(self) -> str:
        """Concatenated feedback deltas."""
        return "".join(f.delta for f in self.feedback)

    @property
    def succeeded(self) -> bool:
        return self.status == GoalStatus.STATUS_SUCCEEDED


class GenerateClient:
    """Send Generate goals to ``action_name`` and follow them."""

    def __init__(self, node: Node, action_name: str = "/memspec/generate") -> None:
        self._client = ActionClient(node, Generate, action_name, feedback_sub_qos_profile=FEEDBACK_QOS,
                                    goal_service_qos_profile=GOAL_SERVICE_QOS)

    def wait_for_server(self, timeout_s: float = 30.0) -> bool:
        return self._client.wait_for_server(timeout_sec=timeout_s)

    def send(
        self, goal: Generate.Goal, on_feedback: Callable[[Generate.Feedback], None] | None = None
    ) -> GenerationCall:
        """Send a goal; returns immediately with a call object to wait on."""
        call = GenerationCall()

        def feedback_cb(msg: Generate.Impl.FeedbackMessage) -> None:
            call.feedback.append(msg.feedback)
            if on_feedback is not None:
                on_feedback(msg.feedback)

        def result_cb(future) -> None:
            response = future.result()
            call.result, call.status = response.result, response.status
            call._finished.set()

        def goal_cb(future) -> None:
            handle = future.result()
            call._handle, call.accepted = handle, handle.accepted
            call._responded.set()
            if handle.accepted:
                handle.get_result_async().add_done_callback(result_cb)

        self._client.send_goal_async(goal, feedback_callback=feedback_cb).add_done_callback(goal_cb)
        return call

    def generate(self, goal: Generate.Goal, timeout_s: float = 300.0) -> GenerationCall:
        """Send a goal and wait for its result (raises if rejected)."""
        call = self.send(goal)
        call.wait(timeout_s)
        return call

    def destroy(self) -> None:
        self._client.destroy()
