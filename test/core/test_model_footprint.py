"""A model's loaded size is known before loading, and its config is checked before allocation.

The tampered-config tests write a real tiny model's folder and then edit its ``config.json``,
the way a typo or a hostile file would arrive; every error must name the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import save, tiny_llama

from memspec_ros.core.config_sanity import SIZE_CAPS
from memspec_ros.core.errors import ModelConfigError, ModelLoadError
from memspec_ros.core.model_loading import (
    build_empty_model,
    inspect_footprint,
    load_causal_lm,
    load_config,
    load_state_from_bytes,
    weight_files,
    weights_nbytes,
)
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.safetensors_format import tensor_views


@pytest.fixture()
def model_dir(tiny_zoo, tmp_path) -> Path:
    """A bf16 tiny Llama (stored like the zoo) in its own folder, free to tamper with."""
    model = tiny_llama(tiny_zoo.vocab, 32, 2, seed=11, max_positions=128)
    return save(model.to(torch.bfloat16), tiny_zoo.engine.tokenizer, tmp_path / "draft")


def _tamper(directory: Path, **fields) -> None:
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(fields)
    path.write_text(json.dumps(config))


def test_footprint_is_what_the_loaded_draft_occupies_in_the_compute_dtype(model_dir) -> None:
    footprint = inspect_footprint(model_dir, dtype=torch.float32)
    assert footprint.stored_bytes == weights_nbytes(model_dir)
    # Measured on the real thing: the built module, the draft forward's tables and its KV cache
    # after a full context of tokens.
    model = build_empty_model(load_config(model_dir))
    load_state_from_bytes(model, [f.read_bytes() for f in weight_files(model_dir)])
    module = sum(p.numel() * p.element_size() for p in model.parameters())
    module += sum(b.numel() * b.element_size() for b in model.buffers())
    assert footprint.module_bytes == module
    assert footprint.module_bytes >= 2 * footprint.stored_bytes  # bf16 on disk, fp32 in memory
    proposer = DraftProposer(model, "draft")
    fwd = proposer.forward_impl
    assert footprint.rope_table_bytes == sum(t.numel() * t.element_size() for t in (fwd._cos, fwd._sin))
    fwd.feed(list(range(model.config.max_position_embeddings)))
    assert footprint.kv_cache_bytes == fwd.cache_nbytes()
    assert footprint.resident_bytes == module + footprint.rope_table_bytes + footprint.kv_cache_bytes
    half = inspect_footprint(model_dir, dtype=torch.bfloat16)
    assert half.module_bytes < footprint.module_bytes and half.kv_cache_bytes * 2 == footprint.kv_cache_bytes


@pytest.mark.parametrize("field", sorted(SIZE_CAPS))
def test_absurd_size_field_is_rejected_before_allocation(model_dir, field) -> None:
    _tamper(model_dir, **{field: 10**8})
    with pytest.raises(ModelConfigError, match=rf"config\.json.*{field}.*10+") as err:
        inspect_footprint(model_dir)
    assert str(model_dir) in str(err.value)
    with pytest.raises(ModelConfigError, match=field):  # the target's path checks too
        load_causal_lm(model_dir)


@pytest.mark.parametrize("value", [0, -4, 2.5, "64", True])
def test_non_positive_or_non_integer_size_is_rejected(model_dir, value) -> None:
    _tamper(model_dir, hidden_size=value)
    with pytest.raises(ModelLoadError, match="hidden_size"):
        inspect_footprint(model_dir)


@pytest.mark.parametrize(("fields", "named"), [
    ({"hidden_size": 48, "head_dim": 8}, "hidden_size=48"),
    ({"intermediate_size": 1000}, "intermediate_size=1000"),
    ({"num_hidden_layers": 9}, "num_hidden_layers=9"),
    ({"num_hidden_layers": 1}, "num_hidden_layers=1"),
    ({"vocab_size": 5000}, "vocab_size=5000"),
])
def test_config_that_does_not_describe_the_weights_names_the_field(model_dir, fields, named) -> None:
    _tamper(model_dir, **fields)
    with pytest.raises(ModelConfigError, match="does not describe the weights") as err:
        inspect_footprint(model_dir)
    assert named in str(err.value) and "config.json" in str(err.value)
    with pytest.raises(ModelConfigError, match=named):  # from_pretrained would half-randomise it
        load_causal_lm(model_dir)


def test_plausible_context_length_is_accepted_and_counted(model_dir) -> None:
    before = inspect_footprint(model_dir)
    _tamper(model_dir, max_position_embeddings=4096)  # not in the weights: only the cap applies
    after = inspect_footprint(model_dir)
    assert after.module_bytes == before.module_bytes
    assert after.kv_cache_bytes == before.kv_cache_bytes * 4096 // 128
    assert after.rope_table_bytes == before.rope_table_bytes * 4096 // 128


def test_tensor_views_share_the_blob_and_validate_its_header(model_dir) -> None:
    blob = bytearray(weight_files(model_dir)[0].read_bytes())
    views = tensor_views(blob)
    name = next(iter(views))
    views[name].view(-1)[0] = 123.0  # a view, not a copy: writing through it changes the blob
    assert tensor_views(blob)[name].view(-1)[0].item() == 123.0
    for bad in (b"", b"\xff" * 8 + b"{}", (4).to_bytes(8, "little") + b"[1]x",
                (60).to_bytes(8, "little") + json.dumps({"w": {"dtype": "F32", "shape": [4],
                                                               "data_offsets": [0, 16]}}).encode().ljust(60)):
        with pytest.raises(ModelLoadError, match="not a valid safetensors"):
            tensor_views(bad)
