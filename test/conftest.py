"""Test-wide environment: DDS stays on this machine, models load offline only."""

from __future__ import annotations

import os

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
# A distinct domain per test run so parallel runs on one machine never see each other.
os.environ.setdefault("ROS_DOMAIN_ID", str(10 + os.getpid() % 90))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
