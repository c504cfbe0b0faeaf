"""The forecast the node publishes: predicted_need in /memspec/draft_residency is the policy's.

A real node process (memspec policy, bundled zoo, slow emulated storage so that a load is
visible for seconds) and a planner's context hint over DDS. The forecast must reach the
residency topic *before* the hinted draft is in memory: that is what lets a monitor see why a
prefetch starts.
"""

from __future__ import annotations

import threading
import time

from memspec_interfaces.msg import DraftResidency, DraftState
from std_msgs.msg import String

from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess
from memspec_ros.ros.qos import RESIDENCY_QOS

HINTED = "draft-legal"


class _Messages:
    """Residency messages as they arrive (the executor thread appends, the test polls)."""

    def __init__(self) -> None:
        self.items: list[DraftResidency] = []
        self._lock = threading.Lock()

    def __call__(self, msg: DraftResidency) -> None:
        with self._lock:
            self.items.append(msg)

    def find(self, predicate) -> DraftResidency | None:
        with self._lock:
            return next((m for m in self.items if predicate(m)), None)


def _status(msg: DraftResidency, name: str):
    return next(d for d in msg.drafts if d.name == name)


def _wait(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)  # polling what the executor thread collects
    return False


def test_hint_forecast_is_published_before_the_draft_is_resident(client_node, params_file) -> None:
    messages = _Messages()
    sub = client_node.create_subscription(DraftResidency, "/memspec/draft_residency", messages, RESIDENCY_QOS)
    pub = client_node.create_publisher(String, "/memspec/context_hint", 10)
    started = time.time()

    def fresh(m: DraftResidency) -> bool:  # not a latched message of an earlier node
        return m.stamp.sec + m.stamp.nanosec * 1e-9 >= started

    overrides = {"autostart": True, "budget_drafts": 1, "storage_bandwidth_mbps": 0.5, "residency_period_s": 0.2}
    with NodeProcess(params_file, overrides=overrides) as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_services(60.0), node.log()
        assert _wait(lambda: not node.alive() or lc.get_state() == "active", 180), node.log()
        assert node.alive(), node.log()
        assert _wait(lambda: messages.find(fresh) is not None, 30), node.log()
        before = messages.find(fresh)
        assert _status(before, HINTED).predicted_need == 0.0, "no forecast exists before any scheduling decision"
        assert _status(before, HINTED).state != DraftState.RESIDENT

        def forecast_seen() -> DraftResidency | None:
            return messages.find(lambda m: fresh(m) and _status(m, HINTED).predicted_need > 0.0)

        # Repeated like the context-hint test in test_generate.py: a volatile publisher's
        # first message can be lost while discovery has matched only one side.
        assert _wait(lambda: pub.get_subscription_count() >= 1, 30), "context_hint subscription never matched"
        deadline = time.monotonic() + 30
        while forecast_seen() is None and time.monotonic() < deadline:
            pub.publish(String(data="legal"))
            _wait(lambda: forecast_seen() is not None, 2)
        msg = forecast_seen()
        assert msg is not None, node.log()
        hinted = _status(msg, HINTED)
        assert hinted.state != DraftState.RESIDENT, "the forecast must precede the load it explains"
        assert not hinted.active
        others = [d.predicted_need for d in msg.drafts if d.name != HINTED]
        assert hinted.predicted_need > max(others), [(d.name, d.predicted_need) for d in msg.drafts]
    client_node.destroy_subscription(sub)
    client_node.destroy_publisher(pub)
