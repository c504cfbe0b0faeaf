"""``make demo``: start the node with the bundled models and walk it through its lifecycle.

Everything goes over real DDS to a separate node process, exactly as a robot's dialogue
stack would talk to it.
"""

from __future__ import annotations

import argparse
import sys
import threading

import rclpy
from rclpy.executors import MultiThreadedExecutor

from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params-file", default="config/memspec.yaml")
    args = parser.parse_args(argv)

    rclpy.init()
    client_node = rclpy.create_node("memspec_demo")
    executor = MultiThreadedExecutor()
    executor.add_node(client_node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    ok = True
    with NodeProcess(args.params_file) as node:
        print(f"[demo] started: {' '.join(node.command)}")
        lifecycle = LifecycleClient(client_node)
        if not lifecycle.wait_for_services(60.0):
            print("[demo] the node's lifecycle services did not appear; node log:\n" + node.log())
            return 1
        print(f"[demo] state: {lifecycle.get_state()}")
        for transition in ("configure", "activate", "deactivate", "cleanup", "shutdown"):
            success = lifecycle.change_state(transition)
            state = lifecycle.get_state() if transition != "shutdown" else "finalized"
            print(f"[demo] {transition:<10} -> {'ok' if success else 'FAILED'}; state: {state}")
            ok &= success
        node.stop()
        print("[demo] node log:\n" + node.log())
    executor.shutdown()
    client_node.destroy_node()
    rclpy.try_shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
