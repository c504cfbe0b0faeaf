"""Fixtures for node tests: a real client node spun by a MultiThreadedExecutor in a thread."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from memspec_ros.ros.resilient_spin import spin_until_stopped

REPO = Path(__file__).resolve().parents[2]
PARAMS_FILE = REPO / "config" / "memspec.yaml"


@pytest.fixture(scope="session")
def repo() -> Path:
    """Repository root."""
    return REPO


SHIPPED_SESSION_DIR = "    session_dir: $ROS_HOME/memspec_sessions"


@pytest.fixture(scope="session", autouse=True)
def private_ros_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``ROS_HOME`` of every process the tests start (nodes, tools): a folder of this test run.

    A node run with the shipped params file keeps its sessions in ``$ROS_HOME/memspec_sessions``
    and the tools keep their session tokens in ``$ROS_HOME``; with the user's real ``~/.ros``
    a session opened by one run (or one xdist worker) would belong to another client in the next.
    """
    home = tmp_path_factory.mktemp("ros_home")
    before = os.environ.get("ROS_HOME")
    os.environ["ROS_HOME"] = str(home)
    yield home
    if before is None:
        os.environ.pop("ROS_HOME", None)
    else:
        os.environ["ROS_HOME"] = before


SHIPPED_CATALOGUE = '    catalogue: ""'
SHIPPED_DTYPE = "    dtype: auto "
SHIPPED_K = "    num_speculative_tokens: 0 "
SHIPPED_INTERVAL = "    check_interval: 0 "


@pytest.fixture(scope="session")
def params_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The params file users run the node with, with these changes: the bundled 17 M zoo instead of
    the default real model (the suite's fast fixture; ``test_real_model`` serves the default),
    ``dtype: float32`` (the zoo's tests compare with its fp32 target), ``num_threads: 1``,
    ``num_speculative_tokens: 4`` and ``check_interval: 4`` (the tests' expectations of rounds rest
    on them; ``test_lifecycle`` checks auto) and ``session_dir: ""``.

    The default (0, auto) times speculative rounds at every thread count at each configure:
    a second or two alone, several with two test workers oversubscribing the cores, for each
    of the suite's dozens of node starts. ``test_lifecycle`` checks auto with the file as shipped.
    Sessions stay in memory: the node starts of one worker share this file, and tests reuse
    session ids; ``test_sessions`` gives its nodes a session_dir of their own.
    """
    from memspec_ros.bundled_models import bundled_zoo_root

    text = PARAMS_FILE.read_text()
    for line in ("    num_threads: 0\n", SHIPPED_SESSION_DIR, SHIPPED_CATALOGUE, SHIPPED_DTYPE, SHIPPED_K,
                 SHIPPED_INTERVAL):
        assert line in text, f"config/memspec.yaml changed ({line.strip()!r}): update this fixture"
    path = tmp_path_factory.mktemp("params") / "memspec.yaml"
    text = text.replace("    num_threads: 0\n", "    num_threads: 1\n")
    text = text.replace(SHIPPED_CATALOGUE, f'    catalogue: "{bundled_zoo_root()}"')
    text = text.replace(SHIPPED_DTYPE, "    dtype: float32 ")
    text = text.replace(SHIPPED_K, "    num_speculative_tokens: 4 ").replace(SHIPPED_INTERVAL, "    check_interval: 4 ")
    path.write_text(text.replace(SHIPPED_SESSION_DIR, '    session_dir: ""'))
    return path


@pytest.fixture(scope="session")
def client_node() -> Iterator[Node]:
    rclpy.init()
    node = rclpy.create_node("memspec_test_client")
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    stop = threading.Event()
    # resilient: tests destroy clients while this executor spins (see resilient_spin)
    thread = threading.Thread(target=spin_until_stopped, daemon=True, args=(executor, stop, lambda exc: print(
        f"client executor: {type(exc).__name__}: {exc} (spinning on)", file=sys.stderr)))
    thread.start()
    yield node
    stop.set()
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()


@pytest.fixture(scope="session")
def zoo_engine():
    """The bundled target in this process, as ground truth for lossless checks.

    Single-threaded torch: the node process decodes beside it on a 2-core machine, and two
    intra-op threads per process oversubscribe the cores (a 40-token reference generation
    took 15-22 s with two threads under load, 1.1 s with one).
    """
    import torch

    from memspec_ros.bundled_models import bundled_zoo_root
    from memspec_ros.core.engine import SpeculativeEngine
    from memspec_ros.core.model_loading import load_causal_lm, load_tokenizer

    torch.set_num_threads(1)
    root = bundled_zoo_root() / "target"
    return SpeculativeEngine(load_causal_lm(root), load_tokenizer(root))


@pytest.fixture()
def zoo_copy(tmp_path: Path) -> Path:
    """A private copy of the bundled zoo that a test may damage (weight files hard-linked).

    Hard links, not symlinks: the node refuses model paths that resolve outside the catalogue's
    folder. Only weights are linked (a test replaces them, never writes into them); every
    small file is a real copy, so editing a catalogue or a tokenizer cannot reach the original.
    """
    import os
    import shutil

    from memspec_ros.bundled_models import bundled_zoo_root

    src = bundled_zoo_root()
    dst = tmp_path / "zoo"
    for path in src.rglob("*"):
        out = dst / path.relative_to(src)
        if path.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            if path.suffix != ".safetensors":
                raise OSError("copied, not linked")
            os.link(path, out)
        except OSError:
            shutil.copy2(path, out)
    return dst

