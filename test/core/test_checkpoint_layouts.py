"""Architectures whose checkpoints or forward depart from the common layout load and decode losslessly.

Found by building tiny random models of 35 architectures transformers ships and running each as
target and as draft; these four failed before the fixes they stand for:

* ``gpt_neox`` (Pythia): the file stores the head as ``embed_out.weight``, the module calls it
  ``lm_head.weight``. ``from_pretrained`` renames it; the weights check refused the folder and
  the background draft loader would have left the head unloaded.
* ``opt``: its CausalLM forward calls ``model.decoder`` directly, never its base model's
  forward, so a hook on the base model caught no hidden states (the scorer crashed).
* ``bloom``: ALiBi, no position limit in the config; the footprint refused to size its KV cache.
* ``mixtral``: experts stored one tensor each, fused in the module by a converter while
  loading. Fine as a target; as a draft it is refused at configure with a reason, because the
  byte-level draft loader does not merge tensors.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from conftest import noisy_copy, save, train_tokenizer
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.errors import ModelLoadError
from memspec_ros.core.model_loading import (
    build_empty_model,
    inspect_footprint,
    load_causal_lm,
    load_config,
    load_state_from_bytes,
    weight_files,
)
from memspec_ros.core.position_limit import UNBOUNDED_DEFAULT
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.scorer import TargetScorer
from memspec_ros.runtime.catalogue import CatalogueError, draft_footprint

HIDDEN = 32
CONFIGS: dict[str, dict[str, object]] = {
    "gpt_neox": dict(hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                     max_position_embeddings=256, rotary_pct=0.25),
    "opt": dict(hidden_size=HIDDEN, ffn_dim=2 * HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=256, word_embed_proj_dim=HIDDEN, init_std=0.25),
    "bloom": dict(hidden_size=HIDDEN, n_layer=2, n_head=4),
    "mixtral": dict(hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=256, num_local_experts=4,
                    num_experts_per_tok=2, sliding_window=None),
}
DENSE = ("gpt_neox", "opt", "bloom")
PROMPTS = ("The robot moves to the kitchen", "def add(a, b):")


def _tiny(arch: str, vocab: int, seed: int) -> PreTrainedModel:
    torch.manual_seed(seed)
    config = AutoConfig.for_model(arch, vocab_size=vocab, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                  initializer_range=0.25, **CONFIGS[arch])
    return AutoModelForCausalLM.from_config(config).eval()


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> tuple[Path, object]:
    """``<arch>`` and ``<arch>-noisy`` (a partly agreeing draft) for each architecture, saved."""
    root = tmp_path_factory.mktemp("layouts")
    tokenizer = train_tokenizer(320)
    for seed, arch in enumerate(CONFIGS):
        model = _tiny(arch, len(tokenizer), seed=40 + seed)
        save(model, tokenizer, root / arch)
        save(noisy_copy(model, 0.05, seed=60 + seed), tokenizer, root / f"{arch}-noisy")
    return root, tokenizer


def _byte_loaded(folder: Path) -> PreTrainedModel:
    """The draft as the runtime's background loader builds it: empty module, then file bytes."""
    model = build_empty_model(load_config(folder))
    return load_state_from_bytes(model, [path.read_bytes() for path in weight_files(folder)])


def _stored_names(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in weight_files(folder):
        with safe_open(str(path), framework="pt") as fh:
            names.update(fh.keys())
    return names


def test_the_layouts_really_differ_from_the_modules(folders):
    """Without these differences the tests below would prove nothing."""
    root, _ = folders
    neox = load_causal_lm(root / "gpt_neox", allowed_roots=[root])
    assert "embed_out.weight" in _stored_names(root / "gpt_neox")
    assert "embed_out.weight" not in neox.state_dict()
    mixtral = load_causal_lm(root / "mixtral", allowed_roots=[root])
    assert not _stored_names(root / "mixtral") >= set(mixtral.state_dict())
    assert load_config(root / "bloom").to_dict().get("max_position_embeddings") is None


@pytest.mark.parametrize("arch", list(CONFIGS))
def test_greedy_output_is_the_targets(folders, arch):
    root, tokenizer = folders
    target = load_causal_lm(root / arch, allowed_roots=[root])
    engine = SpeculativeEngine(target, tokenizer)
    drafts = [load_causal_lm(root / f"{name}-noisy", allowed_roots=[root]) for name in (arch, "gpt_neox")]
    for prompt in PROMPTS:
        reference = engine.target_greedy(prompt, 32)
        for draft in drafts:
            session = engine.generate(prompt, DraftProposer(draft, "d"), k=3, max_new_tokens=32)
            assert session.output_ids == reference, (arch, prompt)
    session = engine.generate(PROMPTS[0], DraftProposer(drafts[0], "d"), k=3, max_new_tokens=32)
    assert 0 < sum(s.accepted for s in session.stats) < sum(s.proposed for s in session.stats), \
        "the noisy draft should be partly accepted, so rollbacks happen"


@pytest.mark.parametrize("arch", DENSE)
def test_background_loader_reads_what_from_pretrained_reads(folders, arch):
    root, _ = folders
    folder = root / f"{arch}-noisy"
    reference = load_causal_lm(folder, allowed_roots=[root]).state_dict()
    loaded = _byte_loaded(folder).state_dict()
    assert loaded.keys() == reference.keys()
    for key, tensor in loaded.items():
        assert torch.equal(tensor, reference[key]), key
    draft_footprint(folder)  # a valid draft for a catalogue


def test_a_fused_expert_draft_is_refused_with_the_reason(folders):
    root, _ = folders
    folder = root / "mixtral-noisy"
    with pytest.raises(CatalogueError, match=r"merging stored ones.*use a dense model as a draft"):
        draft_footprint(folder)
    with pytest.raises(ModelLoadError, match=r"several stored tensors"):
        _byte_loaded(folder)


def test_a_model_without_a_position_limit_gets_the_default_context(folders):
    root, tokenizer = folders
    bloom = load_causal_lm(root / "bloom", allowed_roots=[root])
    assert SpeculativeEngine(bloom, tokenizer).max_context == UNBOUNDED_DEFAULT
    assert SpeculativeEngine(bloom, tokenizer, max_context=4 * UNBOUNDED_DEFAULT).max_context == 4 * UNBOUNDED_DEFAULT
    footprint = inspect_footprint(root / "bloom")
    config = bloom.config
    per_token = 2 * config.num_hidden_layers * config.hidden_size * 4  # keys and values, fp32
    assert footprint.kv_cache_bytes == UNBOUNDED_DEFAULT * per_token


def test_opt_hidden_states_are_its_decoders_output(folders):
    """The predictor's features: OPT's forward bypasses its base model's, so they come from the decoder."""
    root, _ = folders
    model = load_causal_lm(root / "opt", allowed_roots=[root])
    ids = list(range(3, 15))
    scores = TargetScorer(model).score(ids)
    with torch.no_grad():
        want = model.get_decoder()(input_ids=torch.tensor([ids])).last_hidden_state[0]
    torch.testing.assert_close(scores.hidden, want)


def test_obsolete_buffers_of_old_checkpoints_are_ignored_as_from_pretrained_ignores_them(folders, tmp_path):
    """Pythia files on the Hub carry the old causal-mask buffers ``attention.bias`` / ``masked_bias``."""
    root, _ = folders
    old = tmp_path / "pythia-old"
    shutil.copytree(root / "gpt_neox-noisy", old)
    weights = weight_files(old)[0]
    tensors = load_file(str(weights))
    tensors["gpt_neox.layers.0.attention.bias"] = torch.ones(1, 1, 8, 8, dtype=torch.bool).tril()
    tensors["gpt_neox.layers.0.attention.masked_bias"] = torch.tensor(-1e9)
    save_file(tensors, str(weights), metadata={"format": "pt"})
    reference = load_causal_lm(root / "gpt_neox-noisy", allowed_roots=[root]).state_dict()
    draft_footprint(old)
    for key, tensor in _byte_loaded(old).state_dict().items():
        assert torch.equal(tensor, reference[key]), key
