"""After rejections and rollbacks, caches equal those of a fresh forward over the same tokens."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from memspec_ros.core.sampling import GREEDY, SamplingParams


def _fresh_cache(model, token_ids):
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=torch.tensor([token_ids]), cache=cache, use_cache=True)
    return cache


def _kv(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer (keys, values) of a DynamicCache or of a draft forward implementation."""
    if isinstance(cache, DynamicCache):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return cache.kv()


def _assert_caches_equal(actual, expected):
    got_layers, want_layers = _kv(actual), _kv(expected)
    assert len(got_layers) == len(want_layers)
    for (got_k, got_v), (want_k, want_v) in zip(got_layers, want_layers, strict=True):
        assert got_k.shape == want_k.shape
        torch.testing.assert_close(got_k, want_k, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(got_v, want_v, atol=1e-5, rtol=1e-4)


def _run_with_rejections(tiny_zoo, params):
    engine = tiny_zoo.engine
    noisy, random_draft = tiny_zoo.fresh_draft("noisy"), tiny_zoo.fresh_draft("random")
    session = engine.start("The robot moves to the kitchen", 40, params)
    for round_no in range(6):
        session.step(noisy if round_no % 3 else random_draft, 4)
    assert any(s.accepted < s.proposed for s in session.stats), "fixture should cause rejections"
    return engine, session, noisy, random_draft


def test_target_and_draft_caches_match_fresh_forward_greedy(tiny_zoo):
    engine, session, noisy, random_draft = _run_with_rejections(tiny_zoo, GREEDY)
    _assert_caches_equal(session.scorer.cache, _fresh_cache(engine.target, session.token_ids[:-1]))
    for draft in (noisy, random_draft):
        # The draft cache may also hold its own unverified proposals; it must equal a fresh
        # forward over exactly the tokens it claims to have seen.
        _assert_caches_equal(draft.forward_impl, _fresh_cache(draft.model, draft.seen_tokens))


def test_target_cache_matches_after_sampling_rounds(tiny_zoo):
    engine, session, noisy, _ = _run_with_rejections(tiny_zoo, SamplingParams(temperature=1.0, seed=5))
    _assert_caches_equal(session.scorer.cache, _fresh_cache(engine.target, session.token_ids[:-1]))
    _assert_caches_equal(noisy.forward_impl, _fresh_cache(noisy.model, noisy.seen_tokens))


def test_caches_match_after_second_turn(tiny_zoo):
    engine, session, noisy, _ = _run_with_rejections(tiny_zoo, GREEDY)
    while not session.done:
        session.step(noisy, 3)
    session.continue_with(" then", 5)
    session.step(noisy, 3)
    _assert_caches_equal(session.scorer.cache, _fresh_cache(engine.target, session.token_ids[:-1]))
    _assert_caches_equal(noisy.forward_impl, _fresh_cache(noisy.model, noisy.seen_tokens))
