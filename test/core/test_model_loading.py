"""Loading: safetensors only, no remote code, confinement, vocab checks, byte-level loading."""

from __future__ import annotations

import contextlib
import json
import os

import pytest
import torch
from conftest import save, tiny_llama, train_tokenizer

from memspec_ros.core.errors import ModelLoadError, UnsafeModelFileError, VocabularyMismatchError
from memspec_ros.core.model_loading import (
    build_empty_model,
    check_vocab_compatible,
    inspect_footprint,
    load_causal_lm,
    load_config,
    load_draft_model,
    load_state_from_bytes,
    load_tokenizer,
    weight_files,
    weights_nbytes,
)


def test_pickle_only_directory_is_refused(tiny_zoo, tmp_path):
    bad = tmp_path / "pickled"
    bad.mkdir()
    (bad / "config.json").write_text((tiny_zoo.root / "target" / "config.json").read_text())
    torch.save(tiny_zoo.engine.target.state_dict(), bad / "pytorch_model.bin")
    with pytest.raises(UnsafeModelFileError, match=r"pickle.*pytorch_model\.bin"):
        load_causal_lm(bad)
    with pytest.raises(UnsafeModelFileError):
        weights_nbytes(bad)


def test_directory_without_weights_is_refused(tmp_path):
    with pytest.raises(ModelLoadError, match=r"no \*\.safetensors"):
        load_causal_lm(tmp_path)
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_causal_lm(tmp_path / "missing")


def test_paths_outside_allowed_roots_are_refused(tiny_zoo, tmp_path):
    root = tiny_zoo.root
    escaping = root / "target" / ".." / ".." / root.name / "target"
    assert load_config(escaping, allowed_roots=[root]).model_type == "llama"  # resolves inside: fine
    outside = tmp_path / "outside"
    save(tiny_llama(tiny_zoo.vocab, 32, 1, seed=4), load_tokenizer(root / "target"), outside)
    sneaky = root / ".." / os.path.relpath(outside, root.parent)  # root/../<...>/outside
    with pytest.raises(ModelLoadError, match="outside the allowed roots"):
        load_causal_lm(sneaky, allowed_roots=[root])
    link = root / "link-to-outside"
    os.symlink(outside, link)
    try:
        with pytest.raises(ModelLoadError, match="outside the allowed roots"):
            load_tokenizer(link, allowed_roots=[root])
    finally:
        link.unlink()
    assert load_causal_lm(outside).config.vocab_size == tiny_zoo.vocab  # unconfined: allowed


def test_remote_code_is_never_executed(tiny_zoo, tmp_path):
    evil = tmp_path / "evil"
    save(tiny_llama(tiny_zoo.vocab, 32, 1, seed=5), load_tokenizer(tiny_zoo.root / "target"), evil)
    marker = tmp_path / "pwned"
    (evil / "evil_model.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    config = json.loads((evil / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "evil_model.Evil", "AutoConfig": "evil_model.EvilConfig"}
    (evil / "config.json").write_text(json.dumps(config))
    with contextlib.suppress(ModelLoadError):
        load_causal_lm(evil)
    assert not marker.exists()


def test_mismatched_vocab_names_the_draft(tiny_zoo, tmp_path):
    other_tokenizer = train_tokenizer(300, text="completely different training text " * 50)
    path = save(tiny_llama(len(other_tokenizer), 32, 1, seed=6), other_tokenizer, tmp_path / "draft-alien")
    target_tok = tiny_zoo.engine.tokenizer
    with pytest.raises(VocabularyMismatchError, match="'draft-alien'") as info:
        load_draft_model(path, target_tok)
    assert info.value.draft_name == "draft-alien"
    with pytest.raises(VocabularyMismatchError, match="'alien'"):
        load_draft_model(path, target_tok, name="alien")


def test_special_token_mismatch_is_detected(tiny_zoo):
    target_tok = tiny_zoo.engine.tokenizer
    other = load_tokenizer(tiny_zoo.root / "target")
    check_vocab_compatible(target_tok, other, "same")
    other.eos_token = "<pad>"
    with pytest.raises(VocabularyMismatchError, match="eos_token"):
        check_vocab_compatible(target_tok, other, "swapped-eos")


def test_draft_with_wrong_logit_count_is_refused_at_step(tiny_zoo):
    from memspec_ros.core.proposer import DraftProposer

    wide = DraftProposer(tiny_llama(tiny_zoo.vocab + 8, 32, 1, seed=7), "wide")
    session = tiny_zoo.engine.start("The robot", 5)
    with pytest.raises(VocabularyMismatchError, match="'wide'"):
        session.step(wide, 2)


def test_weights_nbytes_reads_header_only(tiny_zoo):
    directory = tiny_zoo.root / "draft-random"
    state = tiny_zoo.drafts["random"].model.state_dict()
    expected = sum(t.numel() * t.element_size() for t in state.values())
    assert weights_nbytes(directory) == expected
    assert weights_nbytes(directory) < weight_files(directory)[0].stat().st_size


@pytest.mark.parametrize("tied", [False, True])
def test_build_empty_then_load_bytes_equals_from_pretrained(tiny_zoo, tmp_path, tied):
    model = tiny_llama(tiny_zoo.vocab, 32, 1, seed=8)
    model.config.tie_word_embeddings = tied
    if tied:
        model = type(model)(model.config).eval()
    path = save(model.to(torch.bfloat16), tiny_zoo.engine.tokenizer, tmp_path / f"bf16-{tied}")
    reference = load_causal_lm(path)
    built = build_empty_model(load_config(path))
    blobs = [f.read_bytes() for f in weight_files(path)]
    load_state_from_bytes(built, blobs)
    assert built.dtype == torch.float32
    ids = torch.tensor([[5, 9, 17, 33]])
    with torch.no_grad():
        torch.testing.assert_close(built(ids).logits, reference(ids).logits)
    if tied:
        assert built.lm_head.weight.data_ptr() == built.model.embed_tokens.weight.data_ptr()


def test_load_state_rejects_garbage_and_wrong_shapes(tiny_zoo):
    built = build_empty_model(load_config(tiny_zoo.root / "draft-random"))
    with pytest.raises(ModelLoadError, match="not a valid safetensors"):
        load_state_from_bytes(built, b"not a safetensors file")
    target_bytes = weight_files(tiny_zoo.root / "target")[0].read_bytes()
    with pytest.raises(ModelLoadError, match="do not fit"):
        load_state_from_bytes(built, target_bytes)


def test_weight_files_are_the_files_from_pretrained_reads(tmp_path):
    """Not every *.safetensors file of a folder is weights: Mistral's repositories ship their own
    ``consolidated.safetensors`` beside the transformers files, and a subset draft keeps its
    ``token_map.safetensors``; counted as weights, either made the config check refuse the model."""
    import shutil

    tokenizer = train_tokenizer(320)
    model = tiny_llama(len(tokenizer), 32, 2, seed=1)
    single = save(model, tokenizer, tmp_path / "single")
    (single / "token_map.safetensors").write_bytes((single / "model.safetensors").read_bytes())
    (single / "consolidated.safetensors").write_bytes((single / "model.safetensors").read_bytes())
    assert weight_files(single) == [single / "model.safetensors"]
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="20KB")
    shards = sorted(p.name for p in sharded.glob("model-*.safetensors"))
    assert len(shards) > 1 and [p.name for p in weight_files(sharded)] == shards
    shutil.copy(single / "consolidated.safetensors", sharded / "consolidated.safetensors")
    assert [p.name for p in weight_files(sharded)] == shards  # the index decides, not the glob
    inspect_footprint(sharded)  # the config check sees exactly the model's tensors
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "../single/model.safetensors"
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelLoadError, match="shards outside its folder"):
        weight_files(sharded)
    index["weight_map"][first] = "model-99-of-99.safetensors"
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelLoadError, match=r"missing: model-99-of-99\.safetensors"):
        weight_files(sharded)
    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.copy(single / "model.safetensors", loose / "weights.safetensors")
    shutil.copy(single / "model.safetensors", loose / "token_map.safetensors")
    assert weight_files(loose) == [loose / "weights.safetensors"]
