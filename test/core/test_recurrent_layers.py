"""Caches with more than attention: short convolutions roll back, recurrent states are refused.

LFM2 (an edge model family) mixes short-convolution layers into attention; transformers keeps
their state as the last few conv inputs, which past recording lets us take back exactly like a
sliding window. Jamba's Mamba layers fold every token into a recurrent state that cannot give
one back: such a target cannot serve speculative decoding, and configure and ``memspec_build``
must say so instead of failing mid-generation (before this, the proposer crashed on the
layer kind, and cropping the target would have silently kept rejected tokens in its state).
"""

from __future__ import annotations

import pytest
import torch
from conftest import noisy_copy, save, train_tokenizer
from tiny_architectures import tiny_model

from memspec_ros.core.cache_rollback import (
    can_drop,
    new_cache,
    require_rollback,
    rollback_blockers,
)
from memspec_ros.core.draft_forward import make_draft_forward
from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.errors import ModelConfigError
from memspec_ros.core.model_loading import load_causal_lm
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.sampling import SamplingParams

PROMPT = "The robot moves to the kitchen and"


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("recurrent")
    tokenizer = train_tokenizer(320)
    vocab = len(tokenizer)
    lfm2 = tiny_model("lfm2", vocab, seed=3)
    built = {"lfm2": lfm2, "lfm2-noisy": noisy_copy(lfm2, 0.05, seed=4), "llama": tiny_model("llama", vocab, seed=5),
             "jamba": tiny_model("jamba", vocab, seed=6)}
    for name, model in built.items():
        save(model, tokenizer, root / name)
    loaded = {p.name: load_causal_lm(p, allowed_roots=[root]) for p in sorted(root.iterdir())}
    return {"tokenizer": tokenizer, **loaded}


def test_conv_layers_roll_back_but_recurrent_states_do_not(models) -> None:
    assert rollback_blockers(models["lfm2"]) == {} and rollback_blockers(models["llama"]) == {}
    blockers = rollback_blockers(models["jamba"])
    assert blockers and all("recurrent" in why for why in blockers.values())
    with pytest.raises(ModelConfigError, match=r"'jamba' model cannot take back rejected draft tokens: layer \d+ "
                                               r"holds a recurrent .*Mamba"):
        require_rollback(models["jamba"], "catalogue target")


def test_a_conv_cache_can_drop_what_it_recorded_and_no_more(models) -> None:
    model = models["lfm2"]
    cache = new_cache(model.config)
    with torch.inference_mode():
        model(input_ids=torch.tensor([[5, 6, 7, 8, 9, 10]]), cache=cache, use_cache=True)
        cache.crop(0)  # trimmed to the kernel: nothing recorded beyond it
        assert not can_drop(cache, 1)
        model(input_ids=torch.tensor([[11, 12, 13]]), cache=cache, use_cache=True)
    assert can_drop(cache, 3) and not can_drop(cache, 4)


def _fresh_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1].float()


def test_the_conv_draft_forward_matches_a_fresh_forward_through_rollbacks(models) -> None:
    model = models["lfm2"]
    forward = make_draft_forward(model)
    fed = list(range(5, 15))
    forward.feed(fed)
    # a block fed (a list), or that many positions taken back (an int: 9 is past the recording)
    for step in ([20], [21], [22], 2, [23], [24, 25], 3, [26], 9, [27]):
        if isinstance(step, int):
            fed = fed[:-step]
            forward.truncate(len(fed))
            continue
        fed.extend(step)
        torch.testing.assert_close(forward.feed(step), _fresh_logits(model, fed), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("draft", ["lfm2-noisy", "llama"])
def test_an_lfm2_target_keeps_its_own_greedy_output(models, draft) -> None:
    engine = SpeculativeEngine(models["lfm2"], models["tokenizer"])
    reference = engine.target_greedy(PROMPT, 30)
    ids = models["tokenizer"](PROMPT, return_tensors="pt")["input_ids"]
    generated = models["lfm2"].generate(ids, max_new_tokens=30, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert generated[0, ids.shape[1]:].tolist()[:len(reference)] == reference
    session = engine.generate(PROMPT, DraftProposer(models[draft], draft), k=3, max_new_tokens=30)
    assert session.output_ids == reference
    if draft == "lfm2-noisy":  # partly accepted: both caches were rolled back
        assert 0 < sum(s.accepted for s in session.stats) < sum(s.proposed for s in session.stats)
    sampled = engine.start(PROMPT, 30, SamplingParams(temperature=0.8, seed=3))
    while not sampled.done:
        sampled.step(DraftProposer(models[draft], draft), 3)
    assert len(sampled.output_ids) == 30


def test_an_lfm2_draft_drafts_for_another_architecture(models) -> None:
    engine = SpeculativeEngine(models["llama"], models["tokenizer"])
    session = engine.generate(PROMPT, DraftProposer(models["lfm2"], "lfm2"), k=4, max_new_tokens=30)
    assert session.output_ids == engine.target_greedy(PROMPT, 30)


def test_a_recurrent_target_scorer_rebuilds_rather_than_keep_rejected_tokens(models) -> None:
    """Configure refuses such a target; should the scorer meet one anyway, a rollback rebuilds
    the state (as a fresh forward) instead of cropping conv inputs beside a recurrent state that
    still holds the rejected tokens."""
    from memspec_ros.core.scorer import TargetScorer

    model = models["jamba"]
    scorer = TargetScorer(model)
    prompt = list(range(5, 12))
    scorer.prefill(prompt)
    scorer.score([20, 21, 22])
    scorer.rollback(2)  # 20 accepted; 21 and 22 rejected
    assert scorer.cache_length == len(prompt) + 1
    got = scorer.score([30]).logits[-1]
    torch.testing.assert_close(got, _fresh_logits(model, [*prompt, 20, 30]), atol=1e-4, rtol=1e-3)


def test_a_model_without_attention_heads_is_refused_when_sized(tmp_path) -> None:
    from transformers import MambaConfig, MambaForCausalLM

    from memspec_ros.core.model_loading import inspect_footprint

    tokenizer = train_tokenizer(320)
    mamba = MambaForCausalLM(MambaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                         state_size=4))
    folder = save(mamba, tokenizer, tmp_path / "mamba")
    with pytest.raises(ModelConfigError, match=r"state-space model such as Mamba.*cannot serve speculative"):
        inspect_footprint(folder, allowed_roots=[tmp_path])


def test_memspec_build_times_an_lfm2_target_as_the_runtime_scores_it(models) -> None:
    """Sizing timed the verify pass on a bare cache and cropped it, which a conv layer refuses
    unless it records its past: ``memspec_build drafts`` failed on an LFM2 target."""
    from memspec_ros.builder.step_timing import target_timer

    assert target_timer(models["lfm2"], 5, context=16)(2) > 0


def test_a_state_kept_outside_the_cache_is_named_not_a_crash_in_crop(models) -> None:
    """RecurrentGemma keeps its recurrent state on its modules: its cache layers stay empty,
    which once read as "nothing to roll back" and then crashed in transformers' crop."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("recurrent_gemma", vocab_size=len(models["tokenizer"]), hidden_size=32,
                                  intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, lru_width=32,
                                  attention_window_size=8, block_types=["recurrent", "attention"])
    blockers = rollback_blockers(AutoModelForCausalLM.from_config(config).eval())
    assert blockers == {0: "a recurrent state kept outside the cache, which cannot give tokens back"}


def test_layers_that_hold_nothing_always_roll_back() -> None:
    from transformers import DynamicCache
    from transformers.cache_utils import DummyLayer, DynamicLayer

    cache = DynamicCache()
    cache.layers = [DummyLayer(), DynamicLayer()]
    cache.layers[1].update(torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4))
    assert can_drop(cache, 3)


def test_conv_states_count_in_cache_bytes(models) -> None:
    from memspec_ros.core.scorer import TargetScorer

    draft = DraftProposer(models["lfm2"], "lfm2")
    draft.propose(list(range(5, 15)), 2, SamplingParams())
    scorer = TargetScorer(models["lfm2"])
    scorer.prefill(list(range(5, 15)))
    attention_only = sum(layer.keys.numel() * layer.keys.element_size() * 2 for layer in scorer.cache.layers
                         if hasattr(layer, "keys"))
    assert scorer.cache_bytes > attention_only > 0 and draft.cache_nbytes() > 0


def test_a_forward_that_failed_half_way_is_rebuilt_not_trusted(models) -> None:
    """An error inside the last layer (out of memory, say) leaves earlier layers holding
    positions no kept id stands for; undoing the turn must not keep them."""
    from memspec_ros.core.scorer import TargetScorer

    model = models["llama"]
    scorer = TargetScorer(model)
    prompt = list(range(5, 15))
    scorer.prefill(prompt)

    def fail(*_args: object) -> None:
        raise RuntimeError("injected: out of memory")

    hook = model.model.layers[-1].register_forward_pre_hook(fail)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            scorer.score([20, 21, 22])
    finally:
        hook.remove()
    scorer.truncate(len(prompt))  # what a failed turn's restore does
    got = scorer.score([30]).logits[-1]
    torch.testing.assert_close(got, _fresh_logits(model, [*prompt, 30]), atol=1e-5, rtol=1e-4)
