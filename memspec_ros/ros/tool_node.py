"""The ROS side of a command-line tool: one node, spun in a background thread.

Every tool (``memspec_generate``, ``memspec_monitor``, the demo) needs the same sequence,
and getting it wrong is not harmless: a process that exits while the executor thread still
spins aborts in C++ ("terminate called without an active exception"), and rclpy's own
SIGINT handler shuts the context down before the tool can cancel its goal. So: ROS
arguments from the command line (remaps, namespaces), Ctrl-C left as Python's
KeyboardInterrupt for the tool's main thread, an executor that keeps spinning past rclpy's
own races (``resilient_spin``), and an orderly stop that joins the thread.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from memspec_ros.ros.resilient_spin import spin_until_stopped


@contextmanager
def tool_node(name: str, argv: Sequence[str] | None = None) -> Iterator[Node]:
    """A node named ``name`` (remappable by ``argv``'s ROS arguments), spinning until exit."""
    rclpy.init(args=list(argv) if argv is not None else None, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(name)
    executor = MultiThreadedExecutor()
    executor.add_node(node)
    stop = threading.Event()
    thread = threading.Thread(target=spin_until_stopped, name=f"{name}-spin", daemon=True,
                              args=(executor, stop, lambda exc: print(
                                  f"[{name}] ROS executor error survived: {type(exc).__name__}: {exc}",
                                  file=sys.stderr)))
    thread.start()
    try:
        yield node
    finally:
        stop.set()
        executor.shutdown()
        thread.join()
        node.destroy_node()
        rclpy.try_shutdown()
