"""Entry point of the ``memspec_node`` executable (what ``ros2 run memspec_ros memspec_node`` starts).

Ctrl-C (SIGINT) and a launch stop (SIGTERM) run the node's lifecycle shutdown before the
process ends, so running and queued goals end with a result that says why and the models
are released in order. rclpy's own handlers would instead shut the context down under the
executor and lose those answers, so they are replaced by ours
(``SignalHandlerOptions.NO``): the executor spins in a thread while the main thread waits
for a signal, then drives the shutdown transition with the executor still serving.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from memspec_ros.ros.node import MemSpecNode
from memspec_ros.ros.resilient_spin import spin_until_stopped
from memspec_ros.runtime.heap_tuning import fix_malloc_thresholds


def main(argv: list[str] | None = None) -> int:
    """Run the node until SIGINT/SIGTERM or a ROS shutdown; a MultiThreadedExecutor lets the
    prediction/prefetch callbacks run beside a generation."""
    fix_malloc_thresholds()  # before any model is loaded: a node runs for weeks (see heap_tuning)
    rclpy.init(args=argv if argv is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    node = MemSpecNode()
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    stop = threading.Event()
    signals: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        signals.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    spinner = threading.Thread(
        target=spin_until_stopped, name="memspec-executor", daemon=True,
        args=(executor, stop, lambda exc: node.get_logger().error(
            f"executor error survived: {type(exc).__name__}: {exc}")))
    spinner.start()
    try:
        while not stop.wait(1.0) and spinner.is_alive():
            pass
        if signals:
            _shutdown_lifecycle(node, signal.Signals(signals[0]).name)
    finally:
        stop.set()
        # An executor thread whose generation did not stop waits on the torch thread for good:
        # waiting for it here would hang the exit (the process ends past it, below).
        executor.shutdown(wait_for_threads=not node.generation_running)
        spinner.join(timeout=5.0)
        node.destroy_node()
        rclpy.try_shutdown()
    _exit_past_running_threads()
    return 0


def _exit_past_running_threads() -> None:
    """End the process at once if one of the node's threads is still inside model code.

    The interpreter's finalisation stops a daemon thread with ``pthread_exit`` when it next
    takes the GIL; inside torch's C++ (a tensor being freed, an operator returning) that
    unwinding aborts the process, so a clean shutdown would exit with SIGABRT. Such a thread
    is left when a generation or a load did not stop within its bounded waits, or when the
    node exits without its lifecycle shutdown (an external ROS shutdown leaves the loader
    idle but open); the goals have had their results, so nothing is lost by skipping
    finalisation (which would also wait for the executor thread of a generation that never
    returns).
    """
    running = [t.name for t in threading.enumerate()
               if t is not threading.main_thread() and t.is_alive() and t.name.startswith("memspec-")]
    if running:
        print(f"[memspec] exiting with {', '.join(running)} still running", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(0)


def _shutdown_lifecycle(node: MemSpecNode, why: str) -> None:
    """Run the lifecycle shutdown transition (on_shutdown ends goals with results, frees models)."""
    node.get_logger().info(f"{why}: running the lifecycle shutdown")
    try:
        node.trigger_shutdown()
    except Exception as exc:  # finalized already, or a transition (e.g. configure) is in progress
        node.get_logger().warning(f"lifecycle shutdown not possible now ({exc}); exiting anyway")


if __name__ == "__main__":
    sys.exit(main())
