"""Any causal-LM architecture works as target and as draft, and the output stays the target's own.

Tiny random Llama, Qwen2, GPT-2 and Gemma 2 models (one vocabulary, so any can draft for any)
are saved as safetensors folders and loaded through the public loading code. Gemma 2 carries the
two things the engine once got wrong or could not do: soft-capped logits (the old scorer ran the
decoder and the LM head by hand and sampled from the uncapped distribution) and sliding-window
layers, whose cache transformers refuses to crop once the window is full. Sampled output is
checked against the exact two-token law of a Gemma 2, a Qwen2 and a GPT-2 target, the last two
also in bfloat16 and float16.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from conftest import noisy_copy, save, train_tokenizer, word_tokenizer
from stat_helpers import chi_square_pvalue, exact_two_tokens, sample_two_tokens, total_variation
from tiny_architectures import ARCHITECTURES, GEMMA2_WINDOW, tiny_model
from transformers import DynamicCache, PreTrainedModel

from memspec_ros.core.cache_rollback import can_drop
from memspec_ros.core.draft_forward import HFDraftForward, LlamaDraftForward, make_draft_forward
from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.errors import ModelConfigError
from memspec_ros.core.model_loading import (
    build_empty_model,
    inspect_footprint,
    load_causal_lm,
    load_config,
    load_state_from_bytes,
    load_tokenizer,
    weight_files,
)
from memspec_ros.core.output_head import causal_lm_forward, has_plain_head
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.sampling import GREEDY, SamplingParams
from memspec_ros.core.scorer import TargetScorer

PROMPTS = ("The robot moves to the kitchen", "def add(a, b):")
NEW_TOKENS = 24  # prompt + output is several times the Gemma 2 window


@dataclass
class ArchZoo:
    root: Path
    tokenizer: object
    models: dict[str, PreTrainedModel]
    """``<arch>`` (a target) and ``<arch>-noisy`` (a draft that agrees with it partly)."""

    def draft(self, name: str) -> DraftProposer:
        return DraftProposer(self.models[name], name)


@pytest.fixture(scope="module")
def arch_zoo(tmp_path_factory) -> ArchZoo:
    root = tmp_path_factory.mktemp("arch_zoo")
    tokenizer = train_tokenizer(320)
    vocab = len(tokenizer)
    for seed, arch in enumerate(ARCHITECTURES):
        target = tiny_model(arch, vocab, seed=20 + seed)
        save(target, tokenizer, root / arch)
        save(noisy_copy(target, 0.05, seed=30 + seed), tokenizer, root / f"{arch}-noisy")
    models = {path.name: load_causal_lm(path, allowed_roots=[root]) for path in sorted(root.iterdir())}
    return ArchZoo(root, load_tokenizer(root / "llama", allowed_roots=[root]), models)


def _ids(zoo: ArchZoo, n: int) -> list[int]:
    text = " ".join(PROMPTS) * 4
    return zoo.tokenizer(text)["input_ids"][:n]


# ---------------------------------------------------------------------- the target's output path
@pytest.mark.parametrize("arch", [*ARCHITECTURES, "mistral"])
def test_scorer_gives_the_models_own_logits_and_final_hidden_states(arch_zoo, arch):
    model = arch_zoo.models.get(arch) or tiny_model("mistral", len(arch_zoo.tokenizer), seed=7)
    ids = _ids(arch_zoo, 20)
    scorer = TargetScorer(model)
    scorer.prefill(ids[:9])
    scores = scorer.score(ids[9:])
    with torch.no_grad():
        full = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    torch.testing.assert_close(scores.logits, full.logits[0, 9:].float(), atol=1e-5, rtol=1e-5)
    # hidden_states[-1] is the decoder's post-norm last_hidden_state in this transformers version.
    torch.testing.assert_close(scores.hidden, full.hidden_states[-1][0, 9:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2", "mistral"])
def test_plain_head_shortcut_is_bit_identical_to_the_models_forward(arch_zoo, arch):
    model = arch_zoo.models.get(arch) or tiny_model("mistral", len(arch_zoo.tokenizer), seed=7)
    assert has_plain_head(model)
    ids = torch.tensor([_ids(arch_zoo, 12)])
    shortcut = TargetScorer(model).score(ids[0].tolist())
    with torch.inference_mode():
        logits, hidden = causal_lm_forward(model, ids, DynamicCache(config=model.config))
    assert torch.equal(shortcut.logits, logits.float())
    assert torch.equal(shortcut.hidden, hidden)


def test_soft_capped_logits_are_not_the_raw_head(arch_zoo):
    """The old bug: decoder + head by hand skipped Gemma 2's soft-capping. The scorer must not."""
    model = arch_zoo.models["gemma2"]
    assert not has_plain_head(model)
    ids = _ids(arch_zoo, 10)
    scores = TargetScorer(model).score(ids)
    with torch.no_grad():
        own = model(input_ids=torch.tensor([ids])).logits[0].float()
        raw = model.get_output_embeddings()(model.base_model(input_ids=torch.tensor([ids])).last_hidden_state)[0]
    assert torch.equal(scores.logits, own)
    assert own.abs().max() < model.config.final_logit_softcapping
    assert (raw - own).abs().max() > 0.2, "the cap should matter for this model, or the test proves nothing"


# ---------------------------------------------------------------------- drafts
def test_fast_draft_forward_only_where_it_is_exact(arch_zoo):
    chosen = {arch: type(make_draft_forward(arch_zoo.models[arch])) for arch in ARCHITECTURES}
    assert chosen == {"llama": LlamaDraftForward, "qwen2": LlamaDraftForward,
                      "gpt2": HFDraftForward, "gemma2": HFDraftForward}
    vocab = len(arch_zoo.tokenizer)
    windowed = tiny_model("qwen2", vocab, seed=3)
    windowed.config.use_sliding_window, windowed.config.sliding_window = True, 4
    windowed.config.layer_types = ["sliding_attention"] * 2
    assert not LlamaDraftForward.supports(windowed)
    scaled = tiny_model("llama", vocab, seed=3)
    scaled.config.rope_parameters = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    assert not LlamaDraftForward.supports(type(scaled)(scaled.config))


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_draft_forward_matches_the_models_forward_through_rollbacks(arch_zoo, arch):
    """Blocks, single steps, rollbacks past a full window and a long undo (Gemma 2: a rebuild)."""
    model = arch_zoo.models[f"{arch}-noisy"]
    forward = make_draft_forward(model)
    ids = _ids(arch_zoo, 40)
    fed: list[int] = []

    def check(logits: torch.Tensor) -> None:
        with torch.no_grad():
            want = model(input_ids=torch.tensor([fed])).logits[0, -1].float()
        torch.testing.assert_close(logits, want, atol=1e-4, rtol=1e-4)

    plan = [("feed", ids[:5]), *[("feed", [t]) for t in ids[5:20]], ("truncate", 16), ("feed", ids[16:19]),
            *[("feed", [t]) for t in ids[19:35]], ("truncate", 30), ("feed", [7]), ("truncate", 9),
            ("feed", ids[9:12])]
    for op, arg in plan:
        if op == "truncate":
            forward.truncate(arg)
            del fed[arg:]
            assert forward.length == arg
        else:
            fed.extend(arg)
            check(forward.feed(arg))


# ---------------------------------------------------------------------- end to end
@pytest.mark.parametrize("target", ARCHITECTURES)
def test_greedy_output_is_the_targets_with_drafts_of_every_architecture(arch_zoo, target):
    engine = SpeculativeEngine(arch_zoo.models[target], arch_zoo.tokenizer)
    drafts = [f"{target}-noisy", *(a for a in ARCHITECTURES if a != target)]
    for prompt in PROMPTS:
        reference = engine.target_greedy(prompt, NEW_TOKENS)
        assert engine.generate(prompt, None, max_new_tokens=NEW_TOKENS).output_ids == reference
        for name in drafts:
            session = engine.generate(prompt, arch_zoo.draft(name), k=3, max_new_tokens=NEW_TOKENS)
            assert session.output_ids == reference, (target, name, prompt)
    noisy = engine.generate(PROMPTS[0], arch_zoo.draft(f"{target}-noisy"), k=3, max_new_tokens=NEW_TOKENS)
    assert 0 < sum(s.accepted for s in noisy.stats) < sum(s.proposed for s in noisy.stats), \
        "the noisy draft should be partly accepted, so rollbacks happen"


def _assert_cache_is_fresh_forward(cache: DynamicCache, model: PreTrainedModel, token_ids: list[int]) -> None:
    """Every layer holds what a fresh forward over ``token_ids`` leaves (a sliding layer: its window)."""
    fresh = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=torch.tensor([token_ids]), cache=fresh, use_cache=True)
    assert cache.get_seq_length() == fresh.get_seq_length() == len(token_ids)
    for got, want in zip(cache.layers, fresh.layers, strict=True):
        assert got.keys.shape == want.keys.shape
        torch.testing.assert_close(got.keys, want.keys, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(got.values, want.values, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("target", ["gemma2", "gpt2"])
def test_switching_draft_architectures_between_rounds(arch_zoo, target):
    engine = SpeculativeEngine(arch_zoo.models[target], arch_zoo.tokenizer)
    drafts = {name: arch_zoo.draft(name) for name in (f"{target}-noisy", *ARCHITECTURES)}
    schedule = itertools.cycle([(f"{target}-noisy", 3), ("llama", 2), (None, 1), ("gemma2", 4),
                                (f"{target}-noisy", 4), ("gpt2", 1), ("qwen2", 3), (f"{target}-noisy", 2)])
    for params in (GREEDY, SamplingParams(temperature=0.8, seed=4)):
        session = engine.start(PROMPTS[0], 40, params)
        while not session.done:
            name, k = next(schedule)
            session.step(drafts[name] if name else None, k)
        if params.greedy:
            assert session.output_ids == engine.target_greedy(PROMPTS[0], 40)
        assert any(s.catchup_tokens for s in session.stats)
        _assert_cache_is_fresh_forward(session.scorer.cache, engine.target, session.token_ids[:-1])


def test_undoing_a_turn_past_the_window_rebuilds_the_target_cache(arch_zoo):
    """truncate() after a failed turn reaches positions a sliding window already dropped."""
    model = arch_zoo.models["gemma2"]
    ids = _ids(arch_zoo, 30)
    scorer = TargetScorer(model)
    scorer.prefill(ids[:20])
    for start in range(20, 30, 5):
        scorer.score(ids[start:start + 5])
        scorer.rollback(1)
        scorer.prefill(ids[start + 4:start + 5])
    assert scorer.cache_length == 30
    length = 2 * GEMMA2_WINDOW
    assert not can_drop(scorer.cache, 30 - length)
    scorer.truncate(length)
    _assert_cache_is_fresh_forward(scorer.cache, model, ids[:length])
    scores = scorer.score(ids[length:length + 3])
    with torch.no_grad():
        want = model(input_ids=torch.tensor([ids[:length + 3]])).logits[0, length:].float()
    torch.testing.assert_close(scores.logits, want, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------- sampling
V = 8
PARAMS = SamplingParams(temperature=0.9, top_p=0.95, seed=4321)


def total_variation_between(p: dict, q: dict) -> float:
    """Total-variation distance between two exact laws."""
    return 0.5 * sum(abs(p.get(c, 0.0) - q.get(c, 0.0)) for c in set(p) | set(q))


def _assert_samples_follow(target, draft: DraftProposer, prompt: list[int], exact: dict, wrong: dict) -> None:
    """The engine's first two sampled tokens fit ``exact`` and clearly not ``wrong``.

    600 runs (test_sampling_distribution uses 2500 to detect subtle sampler bugs): plenty to tell
    the target's law from a ``wrong`` one a total variation of 0.3 or more away.
    """
    counts = sample_two_tokens(SpeculativeEngine(target, word_tokenizer(V)), draft, prompt, PARAMS, 600)
    _, pvalue = chi_square_pvalue(counts, exact)
    assert pvalue > 1e-3, f"engine output differs from the target's distribution (p={pvalue:.2e})"
    assert total_variation(counts, exact) < 0.15
    _, wrong_pvalue = chi_square_pvalue(counts, wrong)
    assert wrong_pvalue < 1e-6


def test_soft_capped_target_samples_follow_its_distribution():
    """Rejection sampling against a Gemma 2 target (soft-capped) with a Llama draft.

    Same method as test_sampling_distribution: the joint law of the first two tokens. The test
    also shows it would catch the old scorer: the samples fit the uncapped law very badly.
    """
    target = tiny_model("gemma2", V, seed=12, eos=None, init_range=0.2)
    draft = tiny_model("llama", V, seed=13, eos=None, init_range=0.6)
    prompt = [3, 5]
    exact = exact_two_tokens(target, prompt, PARAMS, V)
    cap = target.config.final_logit_softcapping
    target.config.final_logit_softcapping = None
    uncapped = exact_two_tokens(target, prompt, PARAMS, V)
    target.config.final_logit_softcapping = cap
    assert total_variation_between(exact, uncapped) > 0.5, "the cap should change the law, or this proves nothing"

    _assert_samples_follow(target, DraftProposer(draft, "llama"), prompt, exact, wrong=uncapped)


@pytest.mark.parametrize(("target_arch", "draft_arch", "dtype"), [
    ("qwen2", "gpt2", torch.float32), ("gpt2", "qwen2", torch.float32),
    ("qwen2", "gpt2", torch.bfloat16), ("gpt2", "qwen2", torch.float16)])
def test_sampled_output_follows_each_targets_distribution(target_arch, draft_arch, dtype):
    """Rejection sampling with a Qwen2 and a GPT-2 target, each with a draft of the other family,
    in every supported dtype (the exact law is computed by the target at that dtype).

    The draft is made to disagree with the target (its own two-token law is far from the
    target's), so an engine that let draft tokens through unchecked would fail the fit.
    """
    target = tiny_model(target_arch, V, seed=21, eos=None, init_range=0.3).to(dtype)
    draft = tiny_model(draft_arch, V, seed=22, eos=None, init_range=0.6).to(dtype)
    prompt = [3, 5]
    exact = exact_two_tokens(target, prompt, PARAMS, V)
    drafts_law = exact_two_tokens(draft, prompt, PARAMS, V)
    assert total_variation_between(exact, drafts_law) > 0.3, "the draft should disagree, or this proves little"

    _assert_samples_follow(target, DraftProposer(draft, draft_arch), prompt, exact, wrong=drafts_law)


# ---------------------------------------------------------------------- sizing
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_footprint_is_sized_from_each_architectures_config(arch_zoo, arch):
    footprint = inspect_footprint(arch_zoo.root / arch, allowed_roots=[arch_zoo.root])
    model = arch_zoo.models[arch]
    loaded = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    # An upper bound: the meta-device build does not tie weights, so a tied head counts twice.
    assert footprint.module_bytes >= loaded
    assert footprint.kv_cache_bytes > 0
    assert (footprint.rope_table_bytes > 0) == LlamaDraftForward.supports(model)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_loader_byte_path_builds_each_architecture(arch_zoo, arch):
    """The runtime's loader (empty module + safetensors bytes, tied weights re-tied) == from_pretrained."""
    directory = arch_zoo.root / arch
    model = build_empty_model(load_config(directory))
    load_state_from_bytes(model, [path.read_bytes() for path in weight_files(directory)])
    ids = torch.tensor([_ids(arch_zoo, 8)])
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, arch_zoo.models[arch](input_ids=ids).logits)


def test_gpt2_config_field_names_are_checked_under_their_own_names(arch_zoo, tmp_path):
    broken = tmp_path / "gpt2"
    broken.mkdir()
    for path in (arch_zoo.root / "gpt2").iterdir():
        (broken / path.name).write_bytes(path.read_bytes())
    config = json.loads((broken / "config.json").read_text())
    config["n_positions"] = 10**9
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelConfigError, match="n_positions"):
        inspect_footprint(broken)
