"""Catalogue sizing from safetensors headers, and budgets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from memspec_ros.runtime import Budget, Catalogue, CatalogueError, make_materializer


def test_sizes_are_what_a_loaded_draft_occupies(world) -> None:
    """Budget sizes are measured against the real thing: a materialized draft's module and
    rotary tables, plus its KV cache after a full context (stored bytes are what loads read)."""
    materialize = make_materializer(world.catalogue)
    for spec in world.catalogue:
        stored = load_file(str(spec.weight_files[0]))
        assert spec.stored_bytes == sum(t.numel() * t.element_size() for t in stored.values())
        proposer = materialize(spec, [bytearray(f.read_bytes()) for f in spec.weight_files])
        model, fwd = proposer.model, proposer.forward_impl
        held = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers(), fwd._cos, fwd._sin))
        fwd.feed([i % model.config.vocab_size for i in range(model.config.max_position_embeddings)])
        assert spec.size_bytes == held + fwd.cache_nbytes()
        assert spec.size_bytes > spec.stored_bytes
    sizes = [s.size_bytes for s in world.catalogue]
    assert len(set(sizes)) > 2, "drafts must differ in size"


def test_catalogue_and_materializer_must_agree_on_the_dtype(world) -> None:
    with pytest.raises(ValueError, match="dtype"):
        make_materializer(world.catalogue, dtype=torch.bfloat16)


def test_tampered_draft_config_is_a_catalogue_error_naming_file_and_field(world, tmp_path: Path) -> None:
    _, dirs = world.fresh_catalogue(tmp_path)
    config = json.loads((dirs["draft-robot"] / "config.json").read_text())
    config["max_position_embeddings"] = 10**8
    (dirs["draft-robot"] / "config.json").write_text(json.dumps(config))
    with pytest.raises(CatalogueError, match=r"draft-robot.*config\.json.*max_position_embeddings"):
        Catalogue.from_dirs(dirs)


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


