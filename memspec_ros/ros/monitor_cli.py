"""``memspec_monitor``: a live terminal view of the node's draft working set and acceptance.

Subscribes to ``draft_residency`` (transient-local, so the current state arrives at once)
and ``acceptance_stats`` and redraws a small table whenever either changes. ``--once``
prints the current residency and exits (handy in scripts and tests). ROS arguments
(``--ros-args -r __ns:=/robot1``) work as for any ROS program.
"""

from __future__ import annotations

import argparse
import sys
import threading

from memspec_interfaces.msg import AcceptanceStats, DraftResidency, DraftState
from rclpy.node import Node
from rclpy.utilities import remove_ros_args

from memspec_ros.ros.qos import RESIDENCY_QOS
from memspec_ros.ros.tool_node import tool_node

STATE_NAMES = {
    DraftState.ON_STORAGE: "on storage",
    DraftState.LOADING: "LOADING",
    DraftState.RESIDENT: "RESIDENT",
    DraftState.EVICTING: "evicting",
}


def render(residency: DraftResidency | None, stats: AcceptanceStats | None) -> str:
    """Plain-text table of the working set and the latest acceptance window."""
    lines: list[str] = []
    if residency is None:
        lines.append("waiting for draft_residency ...")
    else:
        mib = 1024 * 1024
        lines.append(f"budget {residency.budget_bytes / mib:6.1f} MiB   used {residency.used_bytes / mib:6.1f} MiB")
        lines.append(f"{'':2}{'draft':<16}{'domain':<9}{'MiB':>6}  {'state':<11}{'load':>5}  {'need':>5}")
        for d in residency.drafts:
            bar = f"{d.load_progress * 100:4.0f}%" if d.state == DraftState.LOADING else ""
            lines.append(
                f"{'>' if d.active else ' '} {d.name:<16}{d.domain:<9}{d.size_bytes / mib:6.1f}  "
                f"{STATE_NAMES.get(d.state, '?'):<11}{bar:>5}  {d.predicted_need:5.2f}"
            )
    if stats is not None:
        per = "  ".join(f"{p.name}:{p.acceptance_rate:.2f}" for p in stats.per_draft if p.rounds)
        lines.append(
            f"active {stats.active_draft or '(target only)'}  acceptance {stats.window_acceptance_rate:.2f}  "
            f"mean len {stats.mean_accepted_length:.2f}  {stats.tokens_per_second:.1f} tok/s  "
            f"switches {stats.draft_switches}  loads {stats.loads}  stall {stats.stall_seconds:.2f} s"
        )
        if per:
            lines.append(f"per draft: {per}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the tool; ``argv`` is a whole command line (program name first), as ``sys.argv``."""
    argv = list(sys.argv if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node", default="memspec",
                        help="the memspec node's name, resolved in this tool's namespace (default %(default)s)")
    parser.add_argument("--once", action="store_true", help="print the current residency and exit")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(remove_ros_args(args=argv)[1:])

    with tool_node("memspec_monitor", argv) as node:
        return _monitor(node, args)


def _monitor(node: Node, args: argparse.Namespace) -> int:
    latest: dict[str, object] = {}
    changed = threading.Event()
    have_residency = threading.Event()

    def keep(key: str):
        def callback(msg: object) -> None:
            latest[key] = msg
            if key == "residency":
                have_residency.set()
            changed.set()

        return callback

    node.create_subscription(DraftResidency, f"{args.node}/draft_residency", keep("residency"), RESIDENCY_QOS)
    node.create_subscription(AcceptanceStats, f"{args.node}/acceptance_stats", keep("stats"), 10)
    try:
        if args.once:
            if not have_residency.wait(args.timeout):
                print("no draft_residency received", file=sys.stderr)
                return 2
            print(render(latest.get("residency"), latest.get("stats")))  # type: ignore[arg-type]
            return 0
        while True:
            changed.wait()
            changed.clear()
            sys.stdout.write("\x1b[2J\x1b[H" + render(latest.get("residency"), latest.get("stats")) + "\n")  # type: ignore[arg-type]
            sys.stdout.flush()
    except KeyboardInterrupt:
        return 0

if __name__ == "__main__":
    sys.exit(main())
