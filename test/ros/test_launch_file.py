"""launch_ros is not installable here, so the launch file is checked statically."""

from __future__ import annotations

import ast
import configparser

import yaml

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


def test_every_parameter_passed_by_launch_is_declared(repo) -> None:
    tree = ast.parse(_launch(repo))
    call = _lifecycle_node_call(tree)
    params = next(k.value for k in call.keywords if k.arg == "parameters")
    passed = {key.value for elt in params.elts if isinstance(elt, ast.Dict) for key in elt.keys}
    assert passed, "launch passes no inline parameters"
    assert passed <= set(PARAMS_BY_NAME), f"undeclared: {passed - set(PARAMS_BY_NAME)}"


def test_params_file_matches_declared_parameters(params_file) -> None:
    values = yaml.safe_load(params_file.read_text())["/**"]["ros__parameters"]
    assert set(values) == set(PARAMS_BY_NAME)
    for name, value in values.items():
        assert type(value) is type(PARAMS_BY_NAME[name].default), name
