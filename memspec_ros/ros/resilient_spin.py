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
import time
from collections.abc import Callable

from rclpy.executors import Executor, ExternalShutdownException

FIRST_BACKOFF_S = 0.01
"""Pause after an error that follows a quiet spell (rclpy's races are one-offs: barely felt)."""
MAX_BACKOFF_S = 2.0
"""Longest pause between spins while an error keeps coming back."""
QUIET_S = 10.0
"""An error after this long without one starts the backoff again from the first pause."""


def spin_until_stopped(executor: Executor, stop: threading.Event,
                       on_error: Callable[[Exception], None]) -> None:
    """Spin ``executor`` until ``stop`` is set, the executor is shut down or ROS shuts down.

    ``on_error`` is told each exception that spinning survived (to log it). After an error the
    next spin waits a little, doubling up to :data:`MAX_BACKOFF_S` while errors repeat: an error
    that comes back on every wait-set build would otherwise spin a core and flood the log.
    ``stop`` is set when spinning ends for any reason, so the caller's main loop sees it.
    """
    errors, last_error = 0, 0.0
    try:
        while not stop.is_set():
            try:
                executor.spin()
                return
            except ExternalShutdownException:
                return
            except Exception as exc:
                if stop.is_set() or not executor.context.ok():
                    return
                on_error(exc)
                now = time.monotonic()
                errors = errors + 1 if now - last_error < QUIET_S else 1
                last_error = now
                stop.wait(min(FIRST_BACKOFF_S * 2 ** (errors - 1), MAX_BACKOFF_S))
    finally:
        stop.set()
