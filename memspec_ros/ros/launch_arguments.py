"""How the launch file turns its arguments into the node's parameters.

Kept out of the launch file (and free of ``launch``/``rclpy`` imports) so that the rule is
tested here, where launch_ros cannot be installed: a params file is the robot's
configuration, so a launch argument overrides it only when the user actually passes one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Launch arguments that may override a parameter of the params file, with their help text.
#: Their default is the empty string, which means "not passed: the params file decides".
OVERRIDABLE = {
    "policy": "Draft scheduling policy; empty (default) = the params file's value",
}

#: Always set by the launch file: it drives configure and activate itself with lifecycle
#: events, so the node must not also autostart.
FORCED = {"autostart": False}


def node_parameters(params_file: str, arguments: Mapping[str, str]) -> list[Any]:
    """The ``parameters=`` list for the node: the params file, then only passed overrides.

    ``arguments`` maps launch argument names to their (already resolved) string values.
    """
    unknown = set(arguments) - set(OVERRIDABLE)
    if unknown:
        raise ValueError(f"not an overridable launch argument: {sorted(unknown)}; known: {sorted(OVERRIDABLE)}")
    passed = {name: value for name, value in arguments.items() if value != ""}
    return [params_file, {**passed, **FORCED}]
