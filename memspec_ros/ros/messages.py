"""Conversions from runtime snapshots to our ROS messages and to /diagnostics.

Kept apart from the node so the mapping (one field per field, documented in msg/) can be
read and tested on its own, and so the runtime layer never imports ROS.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from memspec_interfaces.msg import AcceptanceStats, DraftAcceptance, DraftResidency, DraftState
from std_msgs.msg import Header

from memspec_ros.runtime.residency import ResidencySnapshot


def residency_msg(snapshot: ResidencySnapshot, stamp: Time) -> DraftResidency:
    """DraftResidency from a pool snapshot (state values are shared constants)."""
    msg = DraftResidency(stamp=stamp, budget_bytes=int(snapshot.budget_bytes), used_bytes=int(snapshot.used_bytes))
    msg.drafts = [
        DraftState(
            name=d.name,
            domain=d.domain,
            size_bytes=int(d.size_bytes),
            state=int(d.state),
            load_progress=float(d.load_progress),
            predicted_need=float(d.predicted_need),
            active=bool(d.active),
        )
        for d in snapshot.drafts
    ]
    return msg


def acceptance_msg(stamp: Time, window: Mapping[str, Any]) -> AcceptanceStats:
    """AcceptanceStats from ``DraftRuntime.window_stats()`` (the most recent rounds)."""
    return AcceptanceStats(
        stamp=stamp,
        active_draft=window["active_draft"] or "",
        window_acceptance_rate=float(window["window_acceptance_rate"]),
        mean_accepted_length=float(window["mean_accepted_length"]),
        tokens_per_second=float(window["tokens_per_second"]),
        rounds=int(window["rounds"]),
        per_draft=[
            DraftAcceptance(name=name, acceptance_rate=float(d["acceptance_rate"]), rounds=int(d["rounds"]))
            for name, d in window["per_draft"].items()
        ],
        draft_switches=int(window["draft_switches"]),
        loads=int(window["loads"]),
        stall_seconds=float(window["stall_seconds"]),
    )


def diagnostics_msg(
    stamp: Time, node_name: str, level: bytes, summary: str, values: Mapping[str, object]
) -> DiagnosticArray:
    """One DiagnosticStatus for the node, as robot health monitors (aggregators) expect."""
    status = DiagnosticStatus(
        level=level,
        name=f"{node_name}: speculative decoding",
        message=summary,
        hardware_id="memspec",
        values=[KeyValue(key=k, value=str(v)) for k, v in values.items()],
    )
    return DiagnosticArray(header=Header(stamp=stamp), status=[status])
