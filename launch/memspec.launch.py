"""Start memspec_node as a managed lifecycle node, configure and activate it.

Usage on a robot:
    ros2 launch memspec_ros memspec.launch.py params_file:=/path/to/memspec.yaml
    ros2 launch memspec_ros memspec.launch.py policy:=reactive   # override one parameter

The params file is the robot's configuration: a launch argument such as ``policy``
overrides it only when passed (memspec_ros/ros/launch_arguments.py). The node is a
lifecycle node: the launch file drives configure and then activate with lifecycle events
(the standard launch_ros pattern), so a failed configure shows in the launch log with the
node's reason and the node stays up in 'unconfigured'.
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
from memspec_ros.ros.launch_arguments import OVERRIDABLE, node_parameters


def _node_and_transitions(context: launch.LaunchContext) -> list:
    """Build the node once the arguments are known, so unset overrides are left out."""
    params_file = launch.substitutions.LaunchConfiguration("params_file").perform(context)
    overrides = {name: launch.substitutions.LaunchConfiguration(name).perform(context) for name in OVERRIDABLE}
    node = launch_ros.actions.LifecycleNode(
        package="memspec_ros",
        executable="memspec_node",
        name=launch.substitutions.LaunchConfiguration("node_name"),
        namespace=launch.substitutions.LaunchConfiguration("namespace"),
        output="screen",
        parameters=node_parameters(params_file, overrides),
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
    return [activate_when_inactive, node, configure]


def generate_launch_description() -> launch.LaunchDescription:
    default_params = os.path.join(get_package_share_directory("memspec_ros"), "config", "memspec.yaml")
    arguments = [
        launch.actions.DeclareLaunchArgument(
            "params_file", default_value=default_params, description="YAML file with memspec_node parameters"
        ),
        launch.actions.DeclareLaunchArgument("node_name", default_value="memspec", description="Node name"),
        launch.actions.DeclareLaunchArgument("namespace", default_value="", description="Node namespace"),
    ]
    arguments += [
        launch.actions.DeclareLaunchArgument(name, default_value="", description=help_text)
        for name, help_text in OVERRIDABLE.items()
    ]
    return launch.LaunchDescription([*arguments, launch.actions.OpaqueFunction(function=_node_and_transitions)])
