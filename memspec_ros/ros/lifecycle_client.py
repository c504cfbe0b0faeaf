"""A small client for another node's standard lifecycle services.

Used by the demo, the tests and anyone driving the node without ``ros2 lifecycle``
(which is not available from PyPI): ``ChangeState`` and ``GetState`` over real DDS.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.node import Node

TRANSITIONS = {
    "configure": Transition.TRANSITION_CONFIGURE,
    "activate": Transition.TRANSITION_ACTIVATE,
    "deactivate": Transition.TRANSITION_DEACTIVATE,
    "cleanup": Transition.TRANSITION_CLEANUP,
    "shutdown": Transition.TRANSITION_UNCONFIGURED_SHUTDOWN,
    "shutdown_inactive": Transition.TRANSITION_INACTIVE_SHUTDOWN,
    "shutdown_active": Transition.TRANSITION_ACTIVE_SHUTDOWN,
}


class LifecycleClient:
    """Drive ``/<target>/change_state`` and ``/<target>/get_state`` from a helper node.

    The helper node must be spun by an executor in another thread: calls wait on futures.
    """

    def __init__(self, node: Node, target: str = "/memspec") -> None:
        self._node = node
        self._change = node.create_client(ChangeState, f"{target}/change_state")
        self._get = node.create_client(GetState, f"{target}/get_state")

    def wait_for_services(self, timeout_s: float = 30.0) -> bool:
        """True once the node answers a GetState request.

        Discovery alone is not enough: right after another node of the same name stopped,
        the graph may still list its (dead) services, and a request sent before the new
        server is matched is lost. GetState is idempotent, so it is retried until answered.
        """
        deadline = time.monotonic() + timeout_s
        for client in (self._change, self._get):
            if not client.wait_for_service(timeout_sec=max(0.0, deadline - time.monotonic())):
                return False
        while time.monotonic() < deadline:
            try:
                self.get_state(timeout_s=min(2.0, max(0.1, deadline - time.monotonic())))
                return True
            except TimeoutError:
                continue
        return False

    def wait_for_state(self, label: str, timeout_s: float = 180.0, alive: Callable[[], bool] | None = None) -> bool:
        """True once the node reports state ``label`` (e.g. 'active' after an autostart that
        loads models); False past ``timeout_s`` or as soon as ``alive()`` says its process ended.

        The whole ``timeout_s`` is for both halves: a node process on a busy robot computer may take
        more than a minute just to import torch before its services exist (a fixed 60 s wait for
        them failed a start beside two CPU-bound jobs, the node's log still empty)."""
        deadline = time.monotonic() + timeout_s
        while not self.wait_for_services(min(5.0, max(0.1, deadline - time.monotonic()))):
            if (alive is not None and not alive()) or time.monotonic() >= deadline:
                return False
        while self.get_state() != label:
            if (alive is not None and not alive()) or time.monotonic() >= deadline:
                return False
            time.sleep(0.2)  # polling GetState: every lifecycle node answers it
        return True

    def get_state(self, timeout_s: float = 10.0) -> str:
        """Label of the node's current primary state, e.g. 'unconfigured'."""
        future = self._get.call_async(GetState.Request())
        return self._wait(future, timeout_s).current_state.label

    def change_state(self, transition: str, timeout_s: float = 120.0) -> bool:
        """Request a transition by name; True when the node reports success."""
        request = ChangeState.Request()
        request.transition.id = TRANSITIONS[transition]
        return bool(self._wait(self._change.call_async(request), timeout_s).success)

    @staticmethod
    def _wait(future, timeout_s: float):
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            raise TimeoutError(f"no reply from the lifecycle service within {timeout_s:.0f} s")
        return future.result()
