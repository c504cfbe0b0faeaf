"""What a robot team installs: package.xml, the two dependency lists, the generated docs.

Checked by reading the code's imports, so a new import without its declaration fails here
instead of on a robot where rosdep or pip did not bring it.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from memspec_ros.ros import parameter_docs

REPO = Path(__file__).resolve().parents[1]
# The launch file's imports come from ROS packages that are not installable here.
LAUNCH_ONLY_ROS = {"launch", "launch_ros"}
# Python packages a robot installs with rosdep (package.xml key) rather than pip.
ROSDEP_KEYS = {"yaml": "python3-yaml", "numpy": "python3-numpy"}
DEV_TOOLS = ("pytest", "ruff", "colcon", "matplotlib", "sympy", "ros-")


def _imports(paths: list[Path]) -> set[str]:
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"memspec_ros", "__future__"}


def _node_code() -> list[Path]:
    return [*sorted((REPO / "memspec_ros").rglob("*.py")), *sorted((REPO / "launch").glob("*.py"))]


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _is_ros_module(name: str) -> bool:
    if name in LAUNCH_ONLY_ROS or name == "memspec_interfaces":
        return True
    dists = _distributions().get(name, [])
    return any(d.startswith("ros-") or d.startswith("ros_") for d in dists)


def _requirements(path: Path) -> dict[str, str]:
    reqs = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name = re.split(r"[<>=!~ ]", line, maxsplit=1)[0]
            reqs[name.lower()] = line[len(name):]
    return reqs


def test_package_xml_declares_every_ros_package_and_rosdep_key_the_code_imports() -> None:
    manifest = ET.parse(REPO / "package.xml").getroot()
    declared = {e.text for e in manifest.iter() if e.tag in ("depend", "exec_depend")}
    imported = _imports(_node_code())
    ros = {name for name in imported if _is_ros_module(name)}
    assert {"rclpy", "rcl_interfaces", "action_msgs", "unique_identifier_msgs", "ament_index_python"} <= ros
    assert ros - declared == set(), f"ROS packages imported but not in package.xml: {ros - declared}"
    keys = {ROSDEP_KEYS[name] for name in imported if name in ROSDEP_KEYS}
    assert keys - declared == set(), f"rosdep keys missing from package.xml: {keys - declared}"


def test_runtime_requirements_cover_the_node_with_ranges_and_nothing_else() -> None:
    reqs = _requirements(REPO / "requirements.txt")
    for name, spec in reqs.items():
        assert not name.startswith(DEV_TOOLS), f"{name} is a development tool or a ROS wheel"
        assert ">=" in spec and "<" in spec.replace("<=", ""), f"{name}{spec}: give a range (>=low,<high)"
    imported = {n for n in _imports(_node_code()) if not _is_ros_module(n) and n not in ROSDEP_KEYS}
    dists = _distributions()
    needed = {dists[n][0].lower() for n in imported}
    assert needed <= set(reqs), f"imported by the node but not in requirements.txt: {needed - set(reqs)}"


def test_development_requirements_are_pinned_and_include_the_runtime_list() -> None:
    dev = _requirements(REPO / "requirements-dev.txt")
    for name, spec in dev.items():
        assert spec.startswith("==") or name == "setuptools", f"{name}{spec} is not pinned"
    assert set(_requirements(REPO / "requirements.txt")) <= set(dev)
    assert any(n.startswith("ros-") for n in dev) and "colcon-common-extensions" in dev and "pytest" in dev
    assert "requirements-dev.txt" in (REPO / "scripts" / "setup.sh").read_text()


def test_parameter_docs_are_generated_from_the_declarations() -> None:
    page = REPO / "docs" / "parameters.md"
    assert page.read_text() == parameter_docs.render(), (
        "docs/parameters.md is stale: run python -m memspec_ros.ros.parameter_docs"
    )
    assert "docs/parameters.md" in (REPO / "config" / "memspec.yaml").read_text()
