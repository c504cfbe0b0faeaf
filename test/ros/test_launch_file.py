"""launch_ros is not installable here: the launch file is checked statically, and the rule
it uses to compose the node's parameters (memspec_ros/ros/launch_arguments.py) is run for real."""

from __future__ import annotations

import ast
import configparser
import threading

import pytest
import yaml
from rclpy.parameter_client import AsyncParameterClient

from memspec_ros.ros.launch_arguments import FORCED, OVERRIDABLE, node_parameters
from memspec_ros.ros.node_process import NodeProcess
from memspec_ros.ros.parameters import PARAMS_BY_NAME


def _launch(repo) -> str:
    return (repo / "launch" / "memspec.launch.py").read_text()


def _lifecycle_node_call(tree: ast.AST) -> ast.Call:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "LifecycleNode":
            return node
    raise AssertionError("launch file starts no launch_ros LifecycleNode")


def test_launch_file_parses_and_names_the_installed_executable(repo) -> None:
    tree = ast.parse(_launch(repo))
    call = _lifecycle_node_call(tree)
    kw = {k.arg: k.value for k in call.keywords}
    assert ast.literal_eval(kw["package"]) == "memspec_ros"
    executable = ast.literal_eval(kw["executable"])
    setup_py = (repo / "setup.py").read_text()
    assert f'"{executable} = memspec_ros.' in setup_py, "executable is not a console script of setup.py"
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(repo / "setup.cfg")
    assert cfg["install"]["install_scripts"] == "$base/lib/memspec_ros", "launch looks in lib/<package>"
    assert "params_file" in _launch(repo)


def test_launch_file_builds_parameters_with_the_tested_rule(repo) -> None:
    """The launch file passes node_parameters(...) and declares every overridable argument."""
    source = _launch(repo)
    tree = ast.parse(source)
    call = _lifecycle_node_call(tree)
    params = next(k.value for k in call.keywords if k.arg == "parameters")
    assert isinstance(params, ast.Call) and getattr(params.func, "id", "") == "node_parameters"
    assert "for name, help_text in OVERRIDABLE.items()" in source
    assert set(OVERRIDABLE) | set(FORCED) <= set(PARAMS_BY_NAME)


def test_launch_arguments_override_only_when_passed() -> None:
    assert node_parameters("/p.yaml", {"policy": ""}) == ["/p.yaml", {"autostart": False}]
    assert node_parameters("/p.yaml", {"policy": "hedge"}) == ["/p.yaml", {"policy": "hedge", "autostart": False}]
    with pytest.raises(ValueError, match="budget_drafts"):
        node_parameters("/p.yaml", {"budget_drafts": "3"})


@pytest.mark.parametrize(("argument", "expected"), [("", "reactive"), ("hedge", "hedge")])
def test_params_file_policy_reaches_the_node_unless_the_argument_is_passed(
    client_node, params_file, tmp_path, argument, expected
) -> None:
    """Start the node the way launch_ros would with what the launch file composes."""
    values = yaml.safe_load(params_file.read_text())
    values["/**"]["ros__parameters"]["policy"] = "reactive"
    robot_params = tmp_path / "robot.yaml"
    robot_params.write_text(yaml.safe_dump(values))
    file_arg, inline = node_parameters(str(robot_params), {"policy": argument})
    with NodeProcess(file_arg, overrides=inline) as node:
        client = AsyncParameterClient(client_node, "/memspec")
        assert client.wait_for_services(60.0), node.log()
        future = client.get_parameters(["policy", "autostart"])
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(10.0), "parameter service did not answer"
        policy, autostart = future.result().values
        assert policy.string_value == expected
        assert autostart.bool_value is False


def test_params_file_matches_declared_parameters(params_file) -> None:
    values = yaml.safe_load(params_file.read_text())["/**"]["ros__parameters"]
    assert set(values) == set(PARAMS_BY_NAME)
    for name, value in values.items():
        assert type(value) is type(PARAMS_BY_NAME[name].default), name
