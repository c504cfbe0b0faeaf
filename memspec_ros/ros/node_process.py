"""Start ``memspec_node`` as a separate process, as a robot's bringup would.

The demo and the node tests talk to the node only over DDS, so they run it in its own
process with its own executor; this module owns starting it, collecting its log and
stopping it without leaving orphans.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


class NodeProcess:
    """A running memspec_node; use as a context manager so it is always stopped."""

    def __init__(self, params_file: str | Path, overrides: dict[str, object] | None = None,
                 env: dict[str, str] | None = None, *, executable: Path | None = None,
                 ros_args: list[str] | None = None, inherit_env: bool = True) -> None:
        """``executable`` defaults to the one ``ros2 run`` would find; ``ros_args`` are extra
        ROS arguments (remaps such as ``-r __ns:=/robot1``); with ``inherit_env=False`` the
        process gets ``env`` alone (a workspace's own sourced environment)."""
        exe = executable or find_executable()
        cmd = [str(exe)] if exe else [sys.executable, "-m", "memspec_ros.ros.node_main"]
        cmd += ["--ros-args", "--params-file", str(params_file)]
        for key, value in (overrides or {}).items():
            cmd += ["-p", f"{key}:={_ros_literal(value)}"]
        cmd += ros_args or []
        self.command = cmd
        self._env = {**(os.environ if inherit_env else {}), **(env or {})}
        self._env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        self._env["PYTHONUNBUFFERED"] = "1"
        self._log = tempfile.NamedTemporaryFile(prefix="memspec_node_", suffix=".log", delete=False)  # noqa: SIM115 - lives as long as the process
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> NodeProcess:
        self.proc = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT, env=self._env)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def log_path(self) -> str:
        return self._log.name

    def log(self) -> str:
        """Everything the node printed so far."""
        return Path(self._log.name).read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_kb_and_threads(self) -> tuple[int, int]:
        """The process's resident memory (kB) and thread count now, from /proc: what a soak
        watches for leaks."""
        assert self.proc is not None
        fields = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                fields[key] = int(value.split()[0])
        return fields["VmRSS"], fields["Threads"]

    @property
    def pid(self) -> int | None:
        """The node's process id (None before it started)."""
        return self.proc.pid if self.proc is not None else None

    def kill(self) -> int | None:
        """SIGKILL: the node gets no chance to clean up, as in a crash or a power cut; return the
        exit code (what durability tests simulate)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGINT (like Ctrl-C), then SIGKILL if it does not exit in time; return the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def find_executable(name: str = "memspec_node") -> Path | None:
    """Find ``lib/memspec_ros/<name>`` the way ``ros2 run`` does: in each install prefix."""
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p] + [sys.prefix]
    for prefix in prefixes:
        candidate = Path(prefix) / "lib" / "memspec_ros" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _ros_literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_ros_literal(v) for v in value) + "]"
    if value == "":
        return "''"  # YAML's empty string (a bare `name:=` is no value at all)
    return str(value)
