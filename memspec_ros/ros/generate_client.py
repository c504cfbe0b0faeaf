"""A blocking client for the node's Generate action, for programs and tests.

Wraps rclpy's ActionClient futures in a small synchronous API: ``send`` returns a
:class:`GenerationCall` that collects feedback as it streams and can be waited on or
cancelled. The client node must be spun by an executor in another thread.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from action_msgs.msg import GoalStatus
from memspec_interfaces.action import Generate
from memspec_interfaces.msg import ChatMessage
from rclpy.node import Node
from std_msgs.msg import String
from unique_identifier_msgs.msg import UUID

from memspec_ros.ros.qos import FEEDBACK_QOS, GOAL_SERVICE_QOS, REJECTIONS_QOS
from memspec_ros.ros.race_free_action_client import RaceFreeActionClient


def make_goal(
    prompt: str = "",
    max_new_tokens: int = 0,
    *,
    messages: Sequence[tuple[str, str]] | Sequence[ChatMessage] = (),
    system_prompt: str = "",
    stop: Sequence[str] = (),
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    domain_hint: str = "",
    session_id: str = "",
    session_token: str = "",
) -> Generate.Goal:
    """A Generate goal; every default is the interface's (greedy, the node's default length).

    Send ``prompt`` (raw text) or ``messages`` (``(role, content)`` pairs or ``ChatMessage``),
    not both. ``seed`` 0 asks the node to draw one (reported in the result).
    """
    return Generate.Goal(
        prompt=prompt,
        messages=[m if isinstance(m, ChatMessage) else ChatMessage(role=m[0], content=m[1]) for m in messages],
        system_prompt=system_prompt,
        stop=list(stop),
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        domain_hint=domain_hint,
        session_id=session_id,
        session_token=session_token,
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
    _caught_up: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _forget: Callable[[], None] = field(default=lambda: None)
    """Unregisters the call from its client's feedback routing (set by the client)."""
    _on_text: Callable[[str], None] | None = None
    """Told each piece of the answer's text, in order (set by the client's ``send``)."""
    _text_closed: bool = field(default=False, init=False)
    _sent_at: float = field(default_factory=time.monotonic)
    """When the goal was sent: only a rejection reason received after it can be this goal's."""

    FEEDBACK_GRACE_S: ClassVar[float] = 5.0
    """How long ``wait`` lets late feedback arrive after the result. Feedback (a topic) and
    the result (a service response) travel on separate DDS channels, so the result of a short
    generation can overtake its last feedback messages; on a loaded machine (CI, two test
    workers) by more than 2 s. ``wait`` returns as soon as the text has caught up, so the grace
    costs time only when feedback is really late."""

    def _on_feedback(self, feedback: Generate.Feedback) -> None:
        with self._lock:
            self.feedback.append(feedback)
            if self._on_text is not None and not self._text_closed and feedback.delta:
                self._on_text(feedback.delta)
            self._check_caught_up()

    def _close_text(self) -> None:
        """Tell ``_on_text`` the part of the result's text that no feedback carried.

        Feedback is best effort in time: under load the last deltas can still be in flight
        when the grace period ends. The result is authoritative, so a reader of ``_on_text``
        always ends up with the whole answer; deltas arriving later are dropped.
        """
        with self._lock:
            if self._text_closed:
                return
            self._text_closed = True
            if self._on_text is None or self.result is None:
                return
            told = self.streamed_text  # every delta so far was told (the text was not closed yet)
            if self.result.text.startswith(told) and len(self.result.text) > len(told):
                self._on_text(self.result.text[len(told):])

    def _on_result(self, result: Generate.Result, status: int) -> None:
        with self._lock:
            self.result, self.status = result, status
            self._check_caught_up()
        self._finished.set()

    def _check_caught_up(self) -> None:
        # text, not token counts: tokens that decode to no text (EOS) send no feedback
        if self.result is not None and len(self.streamed_text) >= len(self.result.text):
            self._caught_up.set()
            self._forget()

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
        if not self._caught_up.wait(self.FEEDBACK_GRACE_S):  # feedback is best effort
            self._forget()
        self._close_text()
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
    """Send Generate goals to ``action_name`` and follow them.

    Feedback is read from the action's feedback topic by a subscription of this client, not
    through ``ActionClient``'s feedback callbacks: rclpy drops a goal's feedback callback as
    soon as its result arrives, and the result of a fast generation regularly overtakes the
    last feedback messages (separate DDS channels), which silently cut the streamed text short.

    The client remembers the token the node returns for each session it opened and sends it
    with later goals of that session (unless the goal carries one), as a program would.
    """

    REASONS_MATCH_S: ClassVar[float] = 2.0
    """How long ``wait_for_server`` waits for the rejection reasons publisher after the server."""

    def __init__(self, node: Node, action_name: str = "/memspec/generate") -> None:
        self._node = node
        # Resolved once (namespace, '~', remap rules) so that the action client and the
        # feedback subscription below name the same action.
        self.action_name = node.resolve_topic_name(action_name)
        self._client = RaceFreeActionClient(node, Generate, self.action_name, feedback_sub_qos_profile=FEEDBACK_QOS,
                                           goal_service_qos_profile=GOAL_SERVICE_QOS)
        self._calls: dict[bytes, GenerationCall] = {}
        self._calls_lock = threading.Lock()
        self.session_tokens: dict[str, str] = {}
        self._feedback_sub = node.create_subscription(
            Generate.Impl.FeedbackMessage, f"{self.action_name}/_action/feedback",
            self._on_feedback_message, FEEDBACK_QOS)
        # The node says why it rejected a goal on ~/goal_rejections beside its ~/generate (an
        # action's goal response carries no reason); kept briefly so a rejected call can report
        # it. An action remapped on the node's side breaks that pairing: the reason is then not
        # found and describe_rejection says where to look.
        self._rejections: deque[tuple[float, str]] = deque(maxlen=64)
        self._rejections_changed = threading.Condition()
        self._rejections_sub = node.create_subscription(
            String, f"{self.action_name.rsplit('/', 1)[0]}/goal_rejections", self._on_rejection, REJECTIONS_QOS)

    def _on_feedback_message(self, msg: Generate.Impl.FeedbackMessage) -> None:
        with self._calls_lock:
            call = self._calls.get(bytes(msg.goal_id.uuid))
        if call is None:
            return  # another client's goal, or one this client has finished with
        call._on_feedback(msg.feedback)

    def _on_rejection(self, msg: String) -> None:
        with self._rejections_changed:
            self._rejections.append((time.monotonic(), msg.data))
            self._rejections_changed.notify_all()

    def rejection_reason(self, call: GenerationCall, timeout_s: float = 2.0) -> str | None:
        """Why the node rejected ``call``: the first reason it published after the goal was sent.

        Why a heuristic: the reason topic carries no goal id, so with several clients sending
        at once the reason may be another client's rejection at the same moment; a program that
        must know for certain reads the node's log. ``None`` if none arrived within ``timeout_s``
        (the subscription had not matched the node's publisher yet, or the node is not ours).
        """
        deadline = time.monotonic() + timeout_s
        with self._rejections_changed:
            while True:
                for i, (at, reason) in enumerate(self._rejections):
                    if at >= call._sent_at:
                        del self._rejections[i]  # each reason explains one rejection
                        return reason
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._rejections_changed.wait(left)

    def describe_rejection(self, call: GenerationCall, timeout_s: float = 2.0) -> str:
        """The node's reason for rejecting ``call``, or where to look for it, for a person."""
        reason = self.rejection_reason(call, timeout_s)
        if reason is not None:
            return reason
        return (f"no reason arrived within {timeout_s:.0f} s (the node publishes it on "
                f"{self._rejections_sub.topic_name} and logs it)")

    def wait_for_server(self, timeout_s: float = 30.0) -> bool:
        """Wait for the action server, then briefly for the node's rejection reasons publisher.

        Why the second wait: a reason published before this client's subscription has matched
        the publisher is lost, and the server's goal service is often discovered first.
        """
        if not self._client.wait_for_server(timeout_sec=timeout_s):
            return False
        deadline = time.monotonic() + min(timeout_s, self.REASONS_MATCH_S)
        while self._rejections_sub.get_publisher_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # a graph condition: polled, as rclpy's own wait_for_server polls
        return True

    def send(self, goal: Generate.Goal, on_text: Callable[[str], None] | None = None) -> GenerationCall:
        """Send a goal; returns immediately with a call object to wait on.

        ``on_text`` is told the answer as it streams, piece by piece (from the executor's
        thread); once ``wait`` has returned it has been told the whole of the result's text,
        including any tail whose feedback had not arrived in time.
        """
        call = GenerationCall(_on_text=on_text)
        if goal.session_id and not goal.session_token and goal.session_id in self.session_tokens:
            goal.session_token = self.session_tokens[goal.session_id]
        goal_id = UUID(uuid=list(uuid.uuid4().bytes))
        key = bytes(goal_id.uuid)
        with self._calls_lock:  # registered before sending: no feedback can precede it
            self._calls[key] = call
        call._forget = lambda: self._forget(key)

        def result_cb(future) -> None:
            response = future.result()
            if goal.session_id and response.result.session_token:
                self.session_tokens[goal.session_id] = response.result.session_token
            call._on_result(response.result, response.status)

        def goal_cb(future) -> None:
            handle = future.result()
            call._handle, call.accepted = handle, handle.accepted
            call._responded.set()
            if handle.accepted:
                handle.get_result_async().add_done_callback(result_cb)
            else:
                self._forget(key)

        self._client.send_goal_async(goal, goal_uuid=goal_id).add_done_callback(goal_cb)
        return call

    def _forget(self, key: bytes) -> None:
        with self._calls_lock:
            self._calls.pop(key, None)

    def generate(self, goal: Generate.Goal, timeout_s: float = 300.0) -> GenerationCall:
        """Send a goal and wait for its result (raises if rejected)."""
        call = self.send(goal)
        call.wait(timeout_s)
        return call

    def destroy(self) -> None:
        self._node.destroy_subscription(self._feedback_sub)
        self._node.destroy_subscription(self._rejections_sub)
        self._client.destroy()
