"""Start memspec_node as a managed lifecycle node, configure and activate it.

Usage on a robot:
    ros2 launch memspec_ros memspec.launch.py params_file:=/path/to/memspec.yaml

The node is a lifecycle node: the launch file drives configure and then activate with
lifecycle events (the standard launch_ros pattern), so a failed configure shows in the
launch log with the node's reason and the node stays up in 'unconfigured'.
"""

import os

import launch.actions
import launch.events
import launch.substitutions
import launch_ros.actions
import launch_ros.event_handlers
import launch_ros.events.lifecycle
import lifecycle_msgs.msg
from ament_index_python.packages import get_package_share_directory

import launch


def generate_launch_description() -> launch.LaunchDescription:
    default_params = os.path.join(get_package_share_directory("memspec_ros"), "config", "memspec.yaml")
    params_file = launch.substitutions.LaunchConfiguration("params_file")
    node_name = launch.substitutions.LaunchConfiguration("node_name")
    policy = launch.substitutions.LaunchConfiguration("policy")

    node = launch_ros.actions.LifecycleNode(
        package="memspec_ros",
        executable="memspec_node",
        name=node_name,
        namespace="",
        output="screen",
        parameters=[
            params_file,
            # The launch file performs the transitions itself.
            {"autostart": False, "policy": policy},
        ],
    )

    configure = launch.actions.EmitEvent(
        event=launch_ros.events.lifecycle.ChangeState(
            lifecycle_node_matcher=launch.events.matches_action(node),
            transition_id=lifecycle_msgs.msg.Transition.TRANSITION_CONFIGURE,
        )
    )
    activate_when_inactive = launch.actions.RegisterEventHandler(
        launch_ros.event_handlers.OnStateTransition(
            target_lifecycle_node=node,
            goal_state="inactive",
            entities=[
                launch.actions.EmitEvent(
                    event=launch_ros.events.lifecycle.ChangeState(
                        lifecycle_node_matcher=launch.events.matches_action(node),
                        transition_id=lifecycle_msgs.msg.Transition.TRANSITION_ACTIVATE,
                    )
                )
            ],
        )
    )

    return launch.LaunchDescription(
        [
            launch.actions.DeclareLaunchArgument(
                "params_file", default_value=default_params, description="YAML file with memspec_node parameters"
            ),
            launch.actions.DeclareLaunchArgument("node_name", default_value="memspec", description="Node name"),
            launch.actions.DeclareLaunchArgument(
                "policy", default_value="memspec", description="Draft scheduling policy"
            ),
            activate_when_inactive,
            node,
            configure,
        ]
    )
