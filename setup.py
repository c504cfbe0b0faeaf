"""ament_python build of memspec_ros (also installable with pip for development)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "memspec_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="memspec_ros maintainers",
    maintainer_email="maintainers@memspec-ros.dev",
    description="Memory-aware speculative decoding for LLMs on robots (ROS 2 node).",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "memspec_node = memspec_ros.ros.node_main:main",
            "memspec_generate = memspec_ros.ros.generate_cli:main",
            "memspec_monitor = memspec_ros.ros.monitor_cli:main",
        ],
    },
)
