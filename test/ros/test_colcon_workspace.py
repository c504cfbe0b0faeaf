"""The package as a robot team uses it: built in a colcon workspace, started from install/.

A plain ``colcon build`` (no ``--symlink-install``) installs only what setup.py names, so
this is the test that catches a file the installed node needs but the install misses (the
bundled model sets, the params file, the launch file), and the one documented command a workspace
runs once to fetch the default model set's target (``memspec_fetch_target``). The workspace's only
"ROS installation" is
our .venv (where the ROS wheels live): the environment starts clean of this repository's own
build (no PYTHONPATH, AMENT_PREFIX_PATH or install/ from `make setup`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)
# Set by `. scripts/env.sh` / install/setup.bash for the development checkout (a robot's
# shell has its own values from /opt/ros/<distro>/setup.bash, which the venv stands in for),
# or by the ROS wheels' bootstrapper inside this very process (a fresh shell has neither).
_DEV_ONLY = ("PYTHONPATH", "AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH", "COLCON_PREFIX_PATH", "LD_LIBRARY_PATH",
             "_ROS_WHEELS_BOOTSTRAP_COMPLETE")


def _repository_files() -> list[Path]:
    """Tracked files plus new ones git does not ignore: what a clone would bring."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, check=True, capture_output=True,
    ).stdout.decode()
    return [Path(p) for p in out.split("\0") if p and (REPO / p).is_file()]


def _robot_shell_env() -> dict[str, str]:
    """This process's environment as a fresh robot shell with ROS sourced would have it."""
    env = {k: v for k, v in os.environ.items() if k not in _DEV_ONLY}
    dev_install = str(REPO / "install")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(dev_install))
    env["AMENT_PREFIX_PATH"] = env["CMAKE_PREFIX_PATH"] = str(VENV)
    return env


def _sourced_env(workspace: Path, base: dict[str, str]) -> dict[str, str]:
    """The environment after ``source install/setup.bash`` in the workspace."""
    out = subprocess.run(
        ["bash", "-c", "set +u; source install/setup.bash && env -0"],
        cwd=workspace, env=base, check=True, capture_output=True,
    ).stdout.decode()
    return dict(line.split("=", 1) for line in out.split("\0") if "=" in line)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A colcon workspace with this repository in src/, built without symlinks."""
    ws = tmp_path_factory.mktemp("ros2_ws")
    src = ws / "src" / "memspec_ros"
    for rel in _repository_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    env = _robot_shell_env()
    build = subprocess.run(
        ["colcon", "build", "--base-paths", "src/memspec_ros", "src/memspec_ros/msg",
         "--event-handlers", "console_cohesion-", "status-"],
        cwd=ws, env=env, capture_output=True, text=True, timeout=900,
    )
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    assert not (ws / "install" / "memspec_ros" / "share" / "memspec_ros" / "package.xml").is_symlink()
    return ws, _sourced_env(ws, env)


def test_installed_package_carries_everything_the_node_and_launch_file_need(workspace) -> None:
    ws, env = workspace
    probe = (
        "import json, memspec_ros, memspec_interfaces\n"
        "from ament_index_python.packages import get_package_share_directory\n"
        "from memspec_ros.bundled_models import bundled_zoo_root\n"
        "from memspec_ros.ros.launch_arguments import node_parameters\n"
        "share = get_package_share_directory('memspec_ros')\n"
        "print(json.dumps({'package': memspec_ros.__file__, 'interfaces': memspec_interfaces.__file__,\n"
        "  'share': share, 'zoo': str(bundled_zoo_root()),\n"
        "  'launch_params': node_parameters(share + '/config/memspec.yaml', {'policy': ''})}))\n"
    )
    found = json.loads(subprocess.run([sys.executable, "-c", probe], cwd=ws, env=env, check=True,
                                      capture_output=True, text=True).stdout)
    install = ws / "install"
    share = install / "memspec_ros" / "share" / "memspec_ros"
    assert Path(found["package"]).is_relative_to(install), found
    assert Path(found["interfaces"]).is_relative_to(install), found
    assert Path(found["share"]) == share
    assert Path(found["zoo"]) == share / "models" / "zoo", "the bundled zoo must come from the install space"
    for rel in ("config/memspec.yaml", "launch/memspec.launch.py", "models/zoo/target/model.safetensors",
                "models/zoo/predictor.safetensors"):
        assert (share / rel).is_file(), rel
    # What the launch file passes when no argument overrides the params file.
    assert found["launch_params"] == [str(share / "config" / "memspec.yaml"), {"autostart": False}]
    for executable in ("memspec_node", "memspec_generate", "memspec_monitor", "memspec_build", "memspec_fetch_target"):
        assert (install / "memspec_ros" / "lib" / "memspec_ros" / executable).is_file(), executable
    smollm2 = share / "models" / "smollm2"
    assert (smollm2 / "catalogue.yaml").is_file() and (smollm2 / "target.source.yaml").is_file()
    assert not (smollm2 / "target").exists(), "the target is fetched in the workspace, never installed from src/"


def test_installed_executable_configures_with_the_bundled_models_and_serves(workspace, client_node) -> None:
    """The documented two steps on a robot: fetch the default target once, then start the node.

    The wheel comes from this checkout's cache (``make setup`` downloaded it; the command checks its
    sha256 either way), so the test does not download it again. Generous waits: on a busy robot
    computer starting Python with torch alone took over a minute, and configure then loads and
    times a 135 M target."""
    ws, env = workspace
    prefix = ws / "install" / "memspec_ros"
    share = prefix / "share" / "memspec_ros"
    fetch = subprocess.run([str(prefix / "lib" / "memspec_ros" / "memspec_fetch_target"), "--cache",
                            str(REPO / ".cache" / "wheels")], cwd=ws, env=env, capture_output=True, text=True,
                           timeout=900)
    assert fetch.returncode == 0, fetch.stdout + fetch.stderr
    assert (share / "models" / "smollm2" / "target" / "source.json").is_file()
    with NodeProcess(share / "config" / "memspec.yaml", overrides={"autostart": True, "session_dir": ""}, env=env,
                     inherit_env=False, executable=prefix / "lib" / "memspec_ros" / "memspec_node") as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_state("active", timeout_s=900.0, alive=node.alive), node.log()
        assert f"catalogue={share / 'models' / 'smollm2' / 'catalogue.yaml'}" in node.log(), node.log()
        gen = GenerateClient(client_node)
        assert gen.wait_for_server(60.0), node.log()
        call = gen.generate(make_goal(messages=[("user", "Could you bring me a cup from the kitchen?")],
                                      max_new_tokens=16), timeout_s=300)
        assert call.succeeded and call.result.num_tokens > 0, (call.result, node.log())
        gen.destroy()
