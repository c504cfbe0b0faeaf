"""Static guarantees about what the code base may load and run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [p for d in ("memspec_ros", "training", "bench", "scripts") for p in (ROOT / d).rglob("*.py")]


def test_trust_remote_code_is_never_enabled() -> None:
    offenders = [
        str(p.relative_to(ROOT)) for p in SOURCES if re.search(r"trust_remote_code\s*=\s*True", p.read_text())
    ]
    assert SOURCES and not offenders, offenders


def test_no_pickle_loading_of_weights() -> None:
    pattern = re.compile(r"torch\.load\(|pickle\.load|use_safetensors\s*=\s*False")
    offenders = [str(p.relative_to(ROOT)) for p in SOURCES if pattern.search(p.read_text())]
    assert not offenders, offenders


def test_nothing_fetches_from_a_hub() -> None:
    pattern = re.compile(r"hf_hub_download|snapshot_download|local_files_only\s*=\s*False")
    offenders = [str(p.relative_to(ROOT)) for p in SOURCES if pattern.search(p.read_text())]
    assert not offenders, offenders
