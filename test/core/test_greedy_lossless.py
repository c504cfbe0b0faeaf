"""Greedy speculative decoding must reproduce the target's own greedy output exactly."""

from __future__ import annotations

import itertools

import pytest

from memspec_ros.core.sampling import GREEDY

PROMPTS = ("The robot moves", "def add(a, b):", "Solve 3x + 5 = 20")


@pytest.mark.parametrize("draft", ["random", "noisy", "exact"])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_each_draft_matches_target_greedy(tiny_zoo, draft, k):
    engine = tiny_zoo.engine
    for prompt in PROMPTS:
        reference = engine.target_greedy(prompt, 30)
        session = engine.generate(prompt, tiny_zoo.fresh_draft(draft), k=k, max_new_tokens=30)
        assert session.output_ids == reference, (draft, k, prompt)
        assert sum(s.emitted for s in session.stats) == len(reference)


def test_acceptance_patterns_are_exercised(tiny_zoo):
    """Guard the fixture: the drafts must produce full, partial and zero acceptance."""
    engine = tiny_zoo.engine
    rates = {}
    for draft in ("random", "noisy", "exact"):
        session = engine.generate(PROMPTS[0], tiny_zoo.fresh_draft(draft), k=4, max_new_tokens=40)
        rates[draft] = sum(s.accepted for s in session.stats) / sum(s.proposed for s in session.stats)
    assert rates["exact"] == 1.0
    assert 0.0 < rates["noisy"] < 1.0


def test_switching_drafts_and_target_only_rounds(tiny_zoo):
    """Changing the draft every few rounds (with target-only rounds mixed in) stays lossless."""
    engine = tiny_zoo.engine
    drafts = {name: tiny_zoo.fresh_draft(name) for name in ("random", "noisy", "exact")}
    schedule = itertools.cycle(
        [("noisy", 3), ("noisy", 2), (None, 1), ("exact", 4), ("random", 2), ("exact", 5),
         (None, 1), (None, 1), ("noisy", 4), ("exact", 1)]
    )
    for prompt in PROMPTS:
        reference = engine.target_greedy(prompt, 60)
        session = engine.start(prompt, 60, GREEDY)
        while not session.done:
            name, k = next(schedule)
            stats = session.step(drafts[name] if name else None, k)
            assert stats.emitted <= stats.accepted + 1
        assert session.output_ids == reference, prompt
        assert any(s.catchup_tokens > 0 for s in session.stats), "switches should need catch-up"


def test_never_exceeds_max_new_tokens(tiny_zoo):
    engine = tiny_zoo.engine
    for n in (1, 2, 3, 7):
        reference = engine.target_greedy(PROMPTS[1], n)
        session = engine.generate(PROMPTS[1], tiny_zoo.fresh_draft("exact"), k=6, max_new_tokens=n)
        assert session.output_ids == reference
        assert len(session.output_ids) == n
        assert session.finish_reason == "length"
        assert all(s.proposed <= n - 1 for s in session.stats)


def test_stops_at_eos(tiny_zoo):
    """Make the 5th greedy token the eos token: generation must stop right after it."""
    engine = tiny_zoo.engine
    reference = engine.target_greedy(PROMPTS[0], 30)
    eos = reference[4]
    original = engine.eos_token_ids
    engine.eos_token_ids = frozenset({eos})
    try:
        cut = reference[: reference.index(eos) + 1]
        for draft in ("exact", "noisy", None):
            proposer = tiny_zoo.fresh_draft(draft) if draft else None
            session = engine.generate(PROMPTS[0], proposer, k=4, max_new_tokens=30)
            assert session.output_ids == cut
            assert session.finish_reason == "eos"
        assert engine.target_greedy(PROMPTS[0], 30) == cut
    finally:
        engine.eos_token_ids = original


def test_multi_turn_keeps_cache_and_matches_fresh_session(tiny_zoo):
    """continue_with() must give the same tokens as a fresh session over the whole history."""
    engine = tiny_zoo.engine
    draft = tiny_zoo.fresh_draft("noisy")
    session = engine.generate(PROMPTS[0], draft, k=3, max_new_tokens=12)
    turn2 = engine.encode(" and then", add_special_tokens=False)
    session.continue_with(turn2, 15)
    cache_before = session.scorer.cache_length
    assert cache_before == len(session.token_ids) - 1
    while not session.done:
        session.step(draft, 3)
    history = session.token_ids[: session.turn_start]
    assert session.output_ids == engine.target_greedy(history, 15)
    # The draft catches up on the new turn's tokens (plus one if it skipped the last round).
    assert len(turn2) <= session.stats[0].catchup_tokens <= len(turn2) + 1


def test_text_streaming_concatenates_to_full_decode(tiny_zoo):
    engine = tiny_zoo.engine
    session = engine.start(PROMPTS[2], 40, GREEDY)
    draft = tiny_zoo.fresh_draft("noisy")
    pieces = []
    while not session.done:
        session.step(draft, 3)
        pieces.append(session.new_text())
    pieces.append(session.new_text())
    assert "".join(pieces) == session.text()


def test_hidden_state_of_verified_tokens(tiny_zoo):
    """The exposed hidden state is the target's final-layer state that produced the last token."""
    import torch

    engine = tiny_zoo.engine
    session = engine.start(PROMPTS[0], 10, GREEDY)
    session.step(tiny_zoo.fresh_draft("exact"), 4)
    ids = torch.tensor([session.token_ids[:-1]])
    with torch.no_grad():
        full = engine.target(input_ids=ids, output_hidden_states=True).hidden_states[-1][0]
    emitted = session.stats[-1].emitted
    torch.testing.assert_close(session.verified_hidden_states, full[-emitted:], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(session.last_hidden_state, full[-1], atol=1e-4, rtol=1e-4)
