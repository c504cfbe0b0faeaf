"""The README's command-line section, run as written, and the tools under ROS remapping.

The lines are read from README.md itself, so the documentation cannot drift from what works.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

from prompts import ROBOT_PROMPT

from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess

REPO = Path(__file__).resolve().parents[2]


def _section_blocks(heading: str) -> list[list[str]]:
    """The bash code blocks of one README section, as lists of lines."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(heading):]
    section = section[: section.index("\n### ", len(heading))]
    return [block.strip().splitlines() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def _tool(args: list[str], timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a console script from the environment's PATH, as a user's shell would."""
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=timeout_s)


def test_readme_command_line_section_works_as_shown(client_node, tmp_path) -> None:
    node_block, tools_block = _section_blocks("### Command-line tools")
    assert node_block == ["make node AUTOSTART=1"]
    assert tools_block[0] == ". scripts/env.sh"
    log = tmp_path / "node.log"
    with log.open("w") as out:
        # Its own session, so that the whole make -> shell -> node tree gets the Ctrl-C.
        node = subprocess.Popen(["bash", "-c", node_block[0]], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        script = []
        for line in tools_block:
            command = line.split("#")[0].strip()
            if "Ctrl-C quits" in line:  # a live view: let it draw, then press Ctrl-C
                command = f"timeout --foreground --preserve-status -s INT 8 {command}"
            script.append(command)
        # ROS_HOME: the session tokens memspec_generate remembers go to this test's folder.
        run = subprocess.run(["bash", "-e", "-c", "\n".join(script)], cwd=REPO, capture_output=True, text=True,
                             timeout=900, env={**os.environ, "ROS_HOME": str(tmp_path)})
        assert run.returncode == 0, run.stdout + run.stderr + log.read_text()
        assert "budget" in run.stdout and "draft-commands" in run.stdout, run.stdout  # the monitor's table
        assert run.stdout.count("tokens/s:") == 2, run.stdout  # both generations printed their statistics
        # The second turn continued the first one's session: the tool sent the remembered token.
        assert json.loads((tmp_path / "memspec_session_tokens.json").read_text())["/memspec/generate"]["kitchen"]
    finally:
        os.killpg(node.pid, signal.SIGINT)
        try:
            node.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait()


def test_tools_honour_namespaces_and_remaps(client_node, params_file) -> None:
    with NodeProcess(params_file, overrides={"autostart": True}, ros_args=["-r", "__ns:=/robot1"]) as node:
        assert LifecycleClient(client_node, "/robot1/memspec").wait_for_state("active", alive=node.alive), node.log()
        monitor = _tool(["memspec_monitor", "--once", "--ros-args", "-r", "__ns:=/robot1"])
        assert monitor.returncode == 0 and "draft-robot" in monitor.stdout, monitor.stdout + monitor.stderr
        by_namespace = _tool(["memspec_generate", ROBOT_PROMPT, "--raw", "--max-new-tokens", "8",
                              "--ros-args", "-r", "__ns:=/robot1"])
        assert by_namespace.returncode == 0, by_namespace.stdout + by_namespace.stderr
        by_remap = _tool(["memspec_generate", ROBOT_PROMPT, "--raw", "--max-new-tokens", "8", "--timeout", "20",
                          "--ros-args", "-r", "memspec/generate:=/robot1/memspec/generate"])
        assert by_remap.returncode == 0, by_remap.stdout + by_remap.stderr
        assert by_namespace.stdout.splitlines()[0] == by_remap.stdout.splitlines()[0]  # same greedy answer
        # a rejected goal: the tool prints the node's reason, read from the namespaced reasons topic
        rejected = _tool(["memspec_generate", ROBOT_PROMPT, "--raw", "--domain-hint", "nosuch",
                          "--ros-args", "-r", "__ns:=/robot1"])
        assert rejected.returncode == 3, rejected.stdout + rejected.stderr
        assert "goal rejected: domain_hint" in rejected.stderr and "is unknown: use one of" in rejected.stderr, \
            rejected.stderr
        unmapped = _tool(["memspec_generate", ROBOT_PROMPT, "--raw", "--timeout", "3"])
        assert unmapped.returncode == 2 and "/memspec/generate" in unmapped.stderr, unmapped.stderr
