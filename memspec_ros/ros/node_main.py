"""Entry point of the ``memspec_node`` executable (what ``ros2 run memspec_ros memspec_node`` starts)."""

from __future__ import annotations

import sys

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

from memspec_ros.ros.node import MemSpecNode


def main(argv: list[str] | None = None) -> int:
    """Run the node until Ctrl-C or a ROS shutdown; a MultiThreadedExecutor lets the
    prediction/prefetch callbacks run beside a generation."""
    rclpy.init(args=argv if argv is not None else sys.argv)
    node = MemSpecNode()
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
