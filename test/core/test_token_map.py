"""Drafts over a subset of the target's vocabulary stay lossless (:mod:`memspec_ros.core.token_map`).

The draft here is the target's own weights restricted to a subset of its tokens plus one
"other" row, so it agrees with the target often (rounds accept and roll back), and every
token outside the subset can only come from the target. Greedy output must equal the
target's; sampled output must follow the target's law, not the law restricted to the subset.
"""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import noisy_copy, save, tiny_llama, train_tokenizer, word_tokenizer
from stat_helpers import chi_square_pvalue, exact_two_tokens, sample_two_tokens, total_variation
from tiny_architectures import tiny_model

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.errors import ModelLoadError
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.sampling import GREEDY, SamplingParams
from memspec_ros.core.token_map import TOKEN_MAP_FILE, TokenMap, load_token_map


def subset_draft(target: torch.nn.Module, token_map: TokenMap, noise: float, seed: int) -> torch.nn.Module:
    """``target``'s (noisy) weights over the subset: embedding and head rows of the subset, and an
    'other' row that averages the rest (what a draft trained on the subset would roughly learn)."""
    draft = noisy_copy(target, noise, seed)
    draft.config = copy.deepcopy(draft.config)  # noisy_copy shares the target's config object
    keep = token_map.draft_to_target
    rest = torch.ones(token_map.target_vocab_size, dtype=torch.bool)
    rest[keep] = False
    with torch.no_grad():
        for module in (draft.get_input_embeddings(), draft.get_output_embeddings()):
            rows = module.weight
            module.weight = torch.nn.Parameter(torch.cat([rows[keep], rows[rest].mean(0, keepdim=True)]))
    draft.config.vocab_size = token_map.draft_vocab_size
    return draft


def test_a_map_translates_both_ways_and_round_trips_through_its_file(tmp_path) -> None:
    token_map = TokenMap.from_ids([7, 2, 9], target_vocab_size=12)
    assert (token_map.other, token_map.draft_vocab_size) == (3, 4)
    assert token_map.to_draft([2, 7, 8, 9, 0]) == [1, 0, 3, 2, 3]
    assert token_map.to_target(2) == 9
    scattered = token_map.scatter(torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64))
    assert scattered.tolist() == [0, 0, 0.3, 0, 0, 0, 0, 0.5, 0, 0.2, 0, 0]
    token_map.save(tmp_path)
    loaded = load_token_map(tmp_path)
    assert loaded is not None and loaded.draft_to_target.tolist() == [7, 2, 9] and loaded.target_vocab_size == 12
    assert load_token_map(tmp_path / "nowhere") is None
    # what distillation teaches: the subset's log-probabilities and, last, the rest's mass
    logits = torch.randn(2, 12)
    taught = token_map.teacher_log_probs(logits).exp()
    probs = torch.softmax(logits, -1)
    torch.testing.assert_close(taught[:, :3], probs[:, [7, 2, 9]])
    torch.testing.assert_close(taught[:, 3], 1 - probs[:, [7, 2, 9]].sum(-1))


@pytest.mark.parametrize(("ids", "match"), [([], "non-empty"), ([1, 1], "distinct"), ([3, 12], r"\[0, 12\)")])
def test_a_bad_map_is_refused(ids, match) -> None:
    with pytest.raises(ValueError, match=match):
        TokenMap.from_ids(ids, 12)


def test_a_damaged_map_file_names_the_file_and_the_fix(tmp_path) -> None:
    from safetensors.torch import save_file

    (tmp_path / TOKEN_MAP_FILE).write_bytes(b"not safetensors")
    with pytest.raises(ModelLoadError, match=rf"{TOKEN_MAP_FILE}: not a usable token map .*memspec_build drafts"):
        load_token_map(tmp_path)
    for ids, width, match in ((torch.tensor([1.5, 2.0]), "12", "not token ids"),
                              (torch.tensor([1, 2]), str(1 << 40), "outside"),
                              (torch.tensor([1, 2]), "twelve", "invalid literal")):
        save_file({"draft_to_target": ids}, str(tmp_path / TOKEN_MAP_FILE),
                  metadata={"format": "memspec-token-map-1", "target_vocab_size": width})
        with pytest.raises(ModelLoadError, match=match):
            load_token_map(tmp_path)


def test_traces_refuse_a_subset_drafts_bare_model() -> None:
    """Teacher-forced traces compare a draft's argmax with target ids: a subset draft's raw
    model would compare its own ids, so its proposer (with the map) is required."""
    from memspec_ros.runtime.traces import Turn, record_dialogue

    tokenizer = train_tokenizer(320)
    vocab = len(tokenizer)
    target = tiny_llama(vocab, 32, 2, seed=3)
    token_map = TokenMap.from_ids(range(0, vocab, 2), vocab)
    subset = subset_draft(target, token_map, 0.02, seed=8)
    engine = SpeculativeEngine(target, tokenizer)
    turns = [Turn(prompt="The robot moves", domain="robot", max_new_tokens=6)]
    with pytest.raises(ValueError, match="pass their proposers"):
        record_dialogue(engine, {"subset": subset}, turns)
    trace = record_dialogue(engine, {"subset": DraftProposer(subset, "subset", token_map)}, turns)
    assert len(trace.turns[0].match["subset"]) == len(trace.turns[0].output_ids)


def test_greedy_output_is_the_targets_with_a_subset_draft(tmp_path) -> None:
    tokenizer = train_tokenizer(320)
    vocab = len(tokenizer)
    target = tiny_llama(vocab, 32, 2, seed=3)
    engine = SpeculativeEngine(target, tokenizer)
    prompt = "The robot moves to the kitchen and"
    reference = engine.target_greedy(prompt, 40)
    # the subset: the tokens of the prompt and of half the target's answer, and a spread of others
    common = sorted({*tokenizer(prompt)["input_ids"], *reference[:20], *range(0, vocab, 3)})
    token_map = TokenMap.from_ids(common, vocab)
    assert set(reference) - set(common), "some answer tokens must lie outside the subset"
    draft = DraftProposer(subset_draft(target, token_map, 0.02, seed=4), "subset", token_map)
    session = engine.generate(prompt, draft, k=3, max_new_tokens=40)
    assert session.output_ids == reference
    accepted, proposed = sum(s.accepted for s in session.stats), sum(s.proposed for s in session.stats)
    assert 0 < accepted < proposed
    kept = len(draft.seen_tokens) - 3  # the last round's rejected proposals may still be in its cache
    assert draft.seen_tokens[:kept] == session.token_ids[:kept]  # target ids, not draft ids
    # the folder form the node loads: model + map, and a model that does not fit its map is refused
    folder = save(draft.model, tokenizer, tmp_path / "draft-subset")
    token_map.save(folder)
    assert load_token_map(folder).draft_vocab_size == draft.model.config.vocab_size
    with pytest.raises(ValueError, match="were not made together"):
        DraftProposer(tiny_llama(vocab, 32, 2, seed=5), "full", token_map)


def test_sampled_output_follows_the_targets_law_not_the_subsets() -> None:
    """Two-token law of a V=8 target, drafted by a draft over 4 of its tokens: tokens outside the
    subset come from rejection sampling's residual draws, so an engine that scattered the
    draft's distribution wrongly, or never wrote them, fails the fit."""
    vocab, prompt = 8, [3, 5]
    params = SamplingParams(temperature=0.9, top_p=0.95, seed=99)
    target = tiny_model("llama", vocab, seed=31, eos=None, init_range=0.3)
    token_map = TokenMap.from_ids([0, 2, 3, 6], vocab)
    draft = DraftProposer(subset_draft(target, token_map, 0.3, seed=32), "subset", token_map)
    exact = exact_two_tokens(target, prompt, params, vocab)
    inside = {cell: p for cell, p in exact.items() if set(cell) <= {0, 2, 3, 6}}
    subset_only = {cell: p / sum(inside.values()) for cell, p in inside.items()}
    assert 0.5 * sum(abs(exact.get(c, 0) - subset_only.get(c, 0)) for c in exact) > 0.2, "too little mass outside"
    counts = sample_two_tokens(SpeculativeEngine(target, word_tokenizer(vocab)), draft, prompt, params, 800)
    _, pvalue = chi_square_pvalue(counts, exact)
    assert pvalue > 1e-3, f"output differs from the target's law (p={pvalue:.2e})"
    assert total_variation(counts, exact) < 0.15
    assert chi_square_pvalue(counts, subset_only)[1] < 1e-6


def test_switching_between_a_subset_draft_and_a_full_one() -> None:
    tokenizer = train_tokenizer(320)
    vocab = len(tokenizer)
    target = tiny_llama(vocab, 32, 2, seed=3)
    engine = SpeculativeEngine(target, tokenizer)
    token_map = TokenMap.from_ids(range(0, vocab, 2), vocab)
    drafts = [DraftProposer(subset_draft(target, token_map, 0.02, seed=6), "subset", token_map),
              DraftProposer(noisy_copy(target, 0.02, seed=7), "full"), None]
    prompt = "def add(a, b):"
    session = engine.start(prompt, 40, GREEDY)
    turn = 0
    while not session.done:
        session.step(drafts[turn % 3], 3)
        turn += 1
    assert session.output_ids == engine.target_greedy(prompt, 40)
