"""The catalogue file and the configure-time checks that its models fit together (no ROS)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.numpy import save_file
from transformers import LlamaConfig, LlamaForCausalLM

from memspec_ros.core.errors import VocabularyMismatchError
from memspec_ros.core.model_loading import load_config, load_tokenizer
from memspec_ros.runtime import Catalogue, load_catalogue_file
from memspec_ros.runtime.catalogue_file import CatalogueFileError, DraftEntry, write_catalogue_file
from memspec_ros.runtime.model_set_checks import ModelSetError, check_draft, check_predictor


def _catalogue(root: Path, world, text: str | None = None) -> Path:
    """``root`` with hard copies of the tiny target and two drafts, and a catalogue of them."""
    for name in ("target", "draft-copy", "draft-robot"):
        if not (root / name).exists():
            shutil.copytree(world.dirs[name], root / name)
    (root / "predictor.safetensors").write_bytes(b"")
    (root / "catalogue.yaml").write_text(text or (
        "target: target\npredictor: predictor.safetensors\ndrafts:\n"
        "  - {name: draft-copy, path: draft-copy, domain: general, description: the target itself}\n"
        "  - {name: draft-robot, path: draft-robot, domain: robot}\n"))
    return root / "catalogue.yaml"


def test_a_catalogue_names_its_models_relative_to_its_folder(world, tmp_path: Path) -> None:
    models = load_catalogue_file(_catalogue(tmp_path, world).parent)  # a folder means its catalogue.yaml
    assert models.target == (tmp_path / "target").resolve()
    assert models.draft_names == ["draft-copy", "draft-robot"]
    assert models.domains == {"draft-copy": "general", "draft-robot": "robot"}
    assert models.draft("draft-copy").description == "the target itself"
    assert models.predictor == (tmp_path / "predictor.safetensors").resolve()
    catalogue = Catalogue.from_file(models)
    assert catalogue.names == models.draft_names and catalogue.by_domain("robot").name == "draft-robot"


def test_written_catalogues_read_back_and_stay_relative(world, tmp_path: Path) -> None:
    _catalogue(tmp_path, world)
    drafts = [DraftEntry("draft-robot", tmp_path / "draft-robot", "robot", "robot talk")]
    path = write_catalogue_file(tmp_path / "set.yaml", target=tmp_path / "target", drafts=drafts,
                                header="made by a test")
    text = path.read_text()
    assert text.startswith("# made by a test\n") and str(tmp_path) not in text
    models = load_catalogue_file(path)
    assert models.draft_names == ["draft-robot"] and models.predictor is None
    assert models.draft("draft-robot").description == "robot talk"


def test_the_predictors_validation_figures_travel_with_the_catalogue(world, tmp_path: Path) -> None:
    """memspec_build predictor records how its predictor did beside the best fixed draft; the node warns on it."""
    from memspec_ros.builder.predictor_step import weak_predictor_advice
    from memspec_ros.runtime.catalogue_file import PredictorValidation

    _catalogue(tmp_path, world)
    (tmp_path / "p.safetensors").write_bytes(b"")
    drafts = [DraftEntry("draft-robot", tmp_path / "draft-robot", "robot")]
    weak = PredictorValidation(top1=0.53, regret=0.089, best_fixed_draft="draft-robot", best_fixed_regret=0.05)
    path = write_catalogue_file(tmp_path / "set.yaml", target=tmp_path / "target", drafts=drafts,
                                predictor=tmp_path / "p.safetensors", predictor_validation=weak)
    loaded = load_catalogue_file(path).predictor_validation
    assert loaded == weak and loaded.loses_to_fixed and "draft-robot" in loaded.describe()
    assert not PredictorValidation(0.7, 0.02, "draft-robot", 0.05).loses_to_fixed
    advice = weak_predictor_advice(weak, tmp_path)
    assert "--time-budget-s" in advice and "static_draft: draft-robot" in advice and "0.089" in advice
    path.write_text(path.read_text().replace("best_fixed_regret: 0.05", "best_fixed_regret: lots"))
    with pytest.raises(CatalogueFileError, match="predictor_validation must map"):
        load_catalogue_file(path)


def test_the_bundled_zoo_is_a_catalogue() -> None:
    from memspec_ros.bundled_models import bundled_zoo_root

    models = load_catalogue_file(bundled_zoo_root())
    assert len(models.drafts) == 6 and models.predictor is not None
    assert models.domains["draft-general"] == "general"


@pytest.mark.parametrize(("body", "match"), [
    ("- just a list\n", "must be a mapping"),
    ("target: target\ndrafts: []\n", "non-empty list"),
    ("target: target\nmodels: []\ndrafts: [{name: a, domain: x}]\n", r"unknown key\(s\) \['models'\]"),
    ("target: ../outside\ndrafts: [{name: draft-copy, domain: x}]\n", "outside the catalogue's folder"),
    ("target: /etc\ndrafts: [{name: draft-copy, domain: x}]\n", "outside the catalogue's folder"),
    ("target: missing\ndrafts: [{name: draft-copy, domain: x}]\n", "target folder .* does not exist"),
    ("target: target\ndrafts: [{name: draft-copy}]\n", r"draft 'draft-copy' needs a non-empty 'domain'"),
    ("target: target\ndrafts: [{name: 'bad name', domain: x}]\n", "not a valid draft name"),
    ("target: target\ndrafts: [{name: draft-copy, domain: x, size: 3}]\n", r"unknown key\(s\) \['size'\]"),
    ("target: target\ndrafts: [{name: draft-gone, domain: x}]\n", "draft 'draft-gone' path folder .* does not exist"),
    ("target: target\ndrafts: [{name: draft-copy, domain: a}, {name: draft-copy, domain: b}]\n",
     r"\['draft-copy'\] appear more than once"),
    ("target: target\npredictor: nope.safetensors\ndrafts: [{name: draft-copy, domain: x}]\n",
     "predictor .* does not exist; train one with `memspec_build predictor`"),
    ("target: target\ndrafts: [{name: draft-copy, domain: x}\n", "not readable YAML"),
])
def test_every_catalogue_error_names_the_file_the_entry_and_the_fix(world, tmp_path: Path, body, match) -> None:
    path = _catalogue(tmp_path, world, body)
    with pytest.raises(CatalogueFileError, match=match) as err:
        load_catalogue_file(path)
    assert str(path) in str(err.value)


def test_a_missing_catalogue_file_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(CatalogueFileError, match=r"does not exist: give the path of a catalogue\.yaml"):
        load_catalogue_file(tmp_path)


def test_drafts_must_match_the_targets_logit_width(world, tmp_path: Path) -> None:
    """Same tokenizer, wider output layer (Qwen2.5-0.5B vs 7B): refused, naming the draft's config."""
    root = _catalogue(tmp_path, world).parent
    config: LlamaConfig = load_config(root / "target")
    wide = LlamaForCausalLM(LlamaConfig(**{**config.to_dict(), "vocab_size": config.vocab_size + 64}))
    wide.save_pretrained(root / "draft-wide", safe_serialization=True)
    load_tokenizer(root / "target").save_pretrained(root / "draft-wide")
    tokenizer = load_tokenizer(root / "target")
    check_draft(tokenizer, config, DraftEntry("draft-robot", root / "draft-robot", "robot"))
    with pytest.raises(ModelSetError, match=r"'draft-wide' .*config.json\) produces \d+ logits but the target"):
        check_draft(tokenizer, config, DraftEntry("draft-wide", root / "draft-wide", "x"))


def test_a_subset_draft_must_be_mapped_onto_this_target(world, tmp_path: Path) -> None:
    """A draft over a subset of the target's tokens (token_map.safetensors) has fewer logits
    than the target, by design; its map must be for this target's width and for its model."""
    from memspec_ros.core.token_map import TOKEN_MAP_FILE, TokenMap

    root = _catalogue(tmp_path, world).parent
    config: LlamaConfig = load_config(root / "target")
    token_map = TokenMap.from_ids(range(0, config.vocab_size, 4), config.vocab_size)
    small = LlamaForCausalLM(LlamaConfig(**{**config.to_dict(), "vocab_size": token_map.draft_vocab_size}))
    small.save_pretrained(root / "draft-small", safe_serialization=True)
    load_tokenizer(root / "target").save_pretrained(root / "draft-small")
    token_map.save(root / "draft-small")
    tokenizer = load_tokenizer(root / "target")
    entry = DraftEntry("draft-small", root / "draft-small", "x")
    check_draft(tokenizer, config, entry)
    TokenMap.from_ids(range(0, config.vocab_size, 4), config.vocab_size + 64).save(root / "draft-small")
    with pytest.raises(ModelSetError, match=r"'draft-small' .*maps onto \d+ target tokens but the target produces"):
        check_draft(tokenizer, config, entry)
    TokenMap.from_ids(range(0, config.vocab_size, 8), config.vocab_size).save(root / "draft-small")
    with pytest.raises(ModelSetError, match="model and map were not made together"):
        check_draft(tokenizer, config, entry)
    (root / "draft-small" / TOKEN_MAP_FILE).write_bytes(b"junk")
    with pytest.raises(ModelSetError, match="not a usable token map"):
        check_draft(tokenizer, config, entry)


def test_drafts_must_share_the_targets_tokenizer(world, tmp_path: Path) -> None:
    root = _catalogue(tmp_path, world).parent
    tok = json.loads((root / "draft-robot" / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[100:102]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (root / "draft-robot" / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(VocabularyMismatchError, match="draft-robot"):
        check_draft(load_tokenizer(root / "target"), load_config(root / "target"),
                    DraftEntry("draft-robot", root / "draft-robot", "robot"))


def test_the_predictor_must_be_made_for_this_target_and_these_drafts(world, tmp_path: Path) -> None:
    config = load_config(world.dirs["target"])
    names = world.catalogue.names
    good = tmp_path / "good.safetensors"
    world.predictor.save(good)
    check_predictor(good, config, names)
    with pytest.raises(ModelSetError, match=r"knows nothing about \['draft-new'\].*memspec_build predictor"):
        check_predictor(good, config, [*names, "draft-new"])
    with pytest.raises(ModelSetError, match=r"trained for drafts the catalogue lacks \['draft-copy'\]"):
        check_predictor(good, config, [n for n in names if n != "draft-copy"])
    other_target = LlamaConfig(**{**config.to_dict(), "hidden_size": config.hidden_size * 2})
    with pytest.raises(ModelSetError, match=r"width 64 but the target's hidden size is 128"):
        check_predictor(good, other_target, names)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": __import__("numpy").zeros(2, dtype="float32")}, str(foreign))
    with pytest.raises(ModelSetError, match="not a memspec predictor file"):
        check_predictor(foreign, config, names)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x00" * 16)
    with pytest.raises(ModelSetError, match="not a readable safetensors file"):
        check_predictor(junk, config, names)
