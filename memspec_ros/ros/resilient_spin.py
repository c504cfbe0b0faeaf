"""Spin an executor so that one error out of rclpy itself does not stop every later callback.

rclpy's action entities race with an executor that spins in another thread: an
``ActionClient`` registers itself with its node before it creates the lock its wait-set
methods take (ros2/rclpy#1589: "'ActionClient' object has no attribute '_lock'"), and
destroying an action client or server can leave the executor adding an already-freed handle
to its wait set ("action server pointer is invalid"). Either raises out of
``executor.spin()``. With a bare ``executor.spin`` thread that silently ends every later
callback: a tool then waits for a goal answer that arrived, a node stops serving. Our
callbacks are guarded (``callback_guard``), so what reaches here is rclpy's own; spinning
again rebuilds the wait set, and messages that arrived meanwhile are still queued in DDS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rclpy.executors import Executor, ExternalShutdownException


def spin_until_stopped(executor: Executor, stop: threading.Event,
                       on_error: Callable[[Exception], None]) -> None:
    """Spin ``executor`` until ``stop`` is set, the executor is shut down or ROS shuts down.

    ``on_error`` is told each exception that spinning survived (to log it). An external ROS
    shutdown sets ``stop``, so the caller's main loop sees it.
    """
    while not stop.is_set():
        try:
            executor.spin()
            return
        except ExternalShutdownException:
            stop.set()
            return
        except Exception as exc:
            if stop.is_set() or not executor.context.ok():
                return
            on_error(exc)
