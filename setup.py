"""ament_python build of memspec_ros (also installable with pip for development)."""

from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "memspec_ros"


def tree_data_files(root: str, skip: tuple[str, ...] = ()) -> list[tuple[str, list[str]]]:
    """data_files entries installing every file under ``root`` into share/<package>/<root>.

    A plain ``colcon build`` (no symlink install) copies only what data_files names, and the
    node finds the bundled model sets in the share directory (memspec_ros/bundled_models.py), so the
    whole folder tree is listed, one entry per directory. Top-level folders named in ``skip``
    are left out (``make zoo``'s intermediate files in ``models/zoo/work``).
    """
    entries: dict[str, list[str]] = {}
    for path in sorted(Path(root).rglob("*")):
        if path.is_file() and path.relative_to(root).parts[0] not in skip:
            entries.setdefault(f"share/{PACKAGE}/{path.parent.as_posix()}", []).append(path.as_posix())
    return sorted(entries.items())

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
        *tree_data_files("models/zoo", skip=("work",)),
        # the default model set; its target is fetched into the installed folder by
        # memspec_fetch_target (models/smollm2/target.source.yaml), never installed from the checkout
        *tree_data_files("models/smollm2", skip=("work", "target")),
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
            "memspec_build = memspec_ros.builder.cli:main",
            "memspec_fetch_target = memspec_ros.builder.fetch_cli:main",
        ],
    },
)
