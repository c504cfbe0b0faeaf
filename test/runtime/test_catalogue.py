"""Catalogue sizing from safetensors headers, budgets, and the zoo manifest."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memspec_ros.runtime import Budget, Catalogue, CatalogueError, load_zoo_manifest


def test_sizes_come_from_safetensors_headers(world) -> None:
    for spec in world.catalogue:
        params = sum(int(t.numel()) for t in __import__("safetensors.torch", fromlist=["load_file"])
                     .load_file(str(spec.weight_files[0])).values())
        assert spec.size_bytes == params * 4  # fp32 tiny models
    sizes = [s.size_bytes for s in world.catalogue]
    assert len(set(sizes)) > 2, "drafts must differ in size"


def test_budget_parsing_and_admission() -> None:
    assert Budget.parse("2 drafts") == Budget(max_drafts=2)
    assert Budget.parse("12MB").max_bytes == 12_000_000
    assert Budget.parse("3MiB").max_bytes == 3 * 1024**2
    assert Budget.parse("unlimited").is_unlimited
    b = Budget(max_bytes=100, max_drafts=2)
    assert b.admits([40, 60]) and not b.admits([40, 61]) and not b.admits([1, 1, 1])
    with pytest.raises(ValueError):
        Budget.parse("lots")


def test_count_budget_reports_bytes_of_largest_drafts(world) -> None:
    sizes = sorted((s.size_bytes for s in world.catalogue), reverse=True)
    assert Budget.drafts(2).capacity_bytes(world.catalogue) == sizes[0] + sizes[1]


def test_missing_weights_is_a_catalogue_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(CatalogueError, match="empty"):
        Catalogue.from_dirs({"draft-x": tmp_path / "empty"})


def test_zoo_manifest(world, tmp_path: Path) -> None:
    zoo = tmp_path / "models" / "zoo"
    zoo.mkdir(parents=True)
    entries = [{"name": "target", "path": str(world.dirs["target"]), "domain": "all"},
               {"name": "draft-copy", "path": str(world.dirs["draft-copy"]), "domain": "robot"},
               {"name": "draft-general", "path": str(world.dirs["draft-general"]), "domain": "mixed"}]
    (zoo / "zoo.yaml").write_text(yaml.safe_dump({"models": entries}))
    manifest = load_zoo_manifest(zoo)
    assert manifest.target == world.dirs["target"]
    cat = Catalogue.from_zoo(zoo)
    assert cat.names == ["draft-copy", "draft-general"]
    assert cat.by_domain("robot").name == "draft-copy"
