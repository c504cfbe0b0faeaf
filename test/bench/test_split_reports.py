"""The predictor's training prompts of any catalogue come from its training report, if it is its own.

Why: a held-out prompt whose text the predictor was trained on would flatter memspec; for a
catalogue built by ``memspec_build`` the only record of those prompts is the hash list in
``reports/predictor.json``. A report left over from another training run (the predictor
retrained or copied in) names other prompts, so it must be recognised and ignored rather than
trusted. No models are loaded: a predictor file here is any safetensors file with metadata.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the ``bench`` package lives at the repository root


def _predictor(folder: Path, seed: int = 1) -> Path:
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "predictor.safetensors"
    meta = {"seed": seed, "sessions": 3, "validation_sessions": 1, "turns": 2, "max_new_tokens": 10, "models": "x"}
    save_file({"weight": np.full((2, 3), seed, dtype=np.float32)}, str(path), metadata={"meta": json.dumps(meta)})
    return path


def _report(folder: Path, predictor: Path, prompts: list[str], **changes: object) -> None:
    report = {"train_prompt_sha1": sorted(hashlib.sha1(p.encode()).hexdigest() for p in prompts),
              "file_bytes": predictor.stat().st_size,
              "predictor_sha1": hashlib.sha1(predictor.read_bytes()).hexdigest(), **changes}
    (folder / "reports").mkdir(exist_ok=True)
    (folder / "reports" / "predictor.json").write_text(json.dumps(report))


def test_a_built_catalogues_report_names_the_training_prompts(tmp_path: Path) -> None:
    from bench.split import load_training_prompts

    predictor = _predictor(tmp_path)
    _report(tmp_path, predictor, ["USER: bring the cup\nROBOT:", "def f(x):\n"])
    found = load_training_prompts(predictor)
    assert "def f(x):\n" in found and "USER: bring the cup\nROBOT:" in found and "other" not in found
    assert found.source == f"predictor training report {tmp_path / 'reports' / 'predictor.json'}"
    assert found.predictor_key["models"] == "x"


def test_a_report_of_another_predictor_is_not_trusted(tmp_path: Path) -> None:
    from bench.split import load_training_prompts

    predictor = _predictor(tmp_path)
    _report(tmp_path, predictor, ["a prompt"], predictor_sha1="0" * 40)
    stale = load_training_prompts(predictor)
    assert not stale.hashes and stale.source.startswith("unavailable")
    _report(tmp_path, predictor, ["a prompt"], file_bytes=1)
    assert not load_training_prompts(predictor).hashes
