"""ROS 2 layer: the lifecycle node, its parameters and command-line tools."""
