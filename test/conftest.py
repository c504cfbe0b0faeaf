"""Test-wide environment: DDS stays on this machine, models load offline only."""

from __future__ import annotations

import os

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
# One DDS domain per test run, so that runs on one machine never see each other's nodes (all
# named /memspec), and one per pytest-xdist worker of a run: the controller picks the run's
# base before it starts the workers, which inherit it and add their index.
if "MEMSPEC_TEST_DOMAIN_BASE" not in os.environ:
    os.environ["MEMSPEC_TEST_DOMAIN_BASE"] = os.environ.get("ROS_DOMAIN_ID") or str(10 + 2 * (os.getpid() % 45))
_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
os.environ["ROS_DOMAIN_ID"] = str(int(os.environ["MEMSPEC_TEST_DOMAIN_BASE"]) + int(_worker.removeprefix("gw")))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
