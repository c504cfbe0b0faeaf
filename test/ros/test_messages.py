"""Runtime snapshots -> ROS messages, field by field (milliseconds; no node, no models)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticStatus
from memspec_interfaces.msg import DraftState as DraftStateMsg

from memspec_ros.ros.messages import acceptance_msg, diagnostics_msg, residency_msg
from memspec_ros.runtime.catalogue import Budget, Catalogue, DraftSpec
from memspec_ros.runtime.pool import DraftPool
from memspec_ros.runtime.residency import DraftState

STAMP = Time(sec=12, nanosec=34)
SIZE = 1000
NAMES = ["draft-general", "draft-code", "draft-legal"]


def _pool() -> DraftPool:
    """Three weightless drafts under a two-draft budget (the pool only stores handles)."""
    catalogue = Catalogue(DraftSpec(n, Path("/nowhere") / n, n.removeprefix("draft-"), SIZE) for n in NAMES)
    return DraftPool(catalogue, Budget.drafts(2), clock=lambda: 0.0)


def test_residency_message_carries_every_draft_and_the_forecast() -> None:
    pool = _pool()
    pool.begin_load("draft-general")
    pool.complete_load("draft-general", object())
    pool.begin_load("draft-code")
    pool.set_progress("draft-code", 0.25)
    pool.set_active("draft-general")
    pool.set_predictions({"draft-legal": 0.75})
    msg = residency_msg(pool.snapshot(), STAMP)
    assert msg.stamp == STAMP
    assert (msg.budget_bytes, msg.used_bytes) == (2 * SIZE, 2 * SIZE)
    by_name = {d.name: d for d in msg.drafts}
    assert list(by_name) == NAMES
    general, code, legal = by_name["draft-general"], by_name["draft-code"], by_name["draft-legal"]
    assert (general.state, general.active, general.load_progress) == (DraftStateMsg.RESIDENT, True, 1.0)
    assert (code.state, code.load_progress, code.active) == (DraftStateMsg.LOADING, pytest.approx(0.25), False)
    assert (legal.state, legal.predicted_need) == (DraftStateMsg.ON_STORAGE, pytest.approx(0.75))
    assert (legal.domain, legal.size_bytes) == ("legal", SIZE)


def test_state_values_are_the_messages_constants() -> None:
    for state in DraftState:
        assert getattr(DraftStateMsg, state.name) == int(state)


def test_acceptance_message_from_window_stats() -> None:
    window = {"active_draft": None, "window_acceptance_rate": 0.5, "mean_accepted_length": 2.5,
              "tokens_per_second": 40.0, "rounds": 8,
              "per_draft": {"draft-code": {"acceptance_rate": 0.5, "rounds": 8}},
              "draft_switches": 3, "loads": 2, "stall_seconds": 0.125}
    msg = acceptance_msg(STAMP, window)
    assert msg.active_draft == "", "no active draft is an empty string"
    assert (msg.window_acceptance_rate, msg.mean_accepted_length, msg.tokens_per_second) == (0.5, 2.5, 40.0)
    assert (msg.rounds, msg.draft_switches, msg.loads, msg.stall_seconds) == (8, 3, 2, 0.125)
    assert [(d.name, d.acceptance_rate, d.rounds) for d in msg.per_draft] == [("draft-code", 0.5, 8)]


def test_diagnostics_message_is_one_status_with_string_values() -> None:
    msg = diagnostics_msg(STAMP, "memspec", DiagnosticStatus.WARN, "target-only", {"budget_used": 0.5, "loads": 3})
    assert msg.header.stamp == STAMP
    (status,) = msg.status
    assert status.level == DiagnosticStatus.WARN and status.name == "memspec: speculative decoding"
    assert status.message == "target-only" and status.hardware_id == "memspec"
    assert [(kv.key, kv.value) for kv in status.values] == [("budget_used", "0.5"), ("loads", "3")]
