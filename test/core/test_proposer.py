"""DraftProposer: lean fast path equivalence, catch-up accounting, context limits."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_llama

from memspec_ros.core.draft_forward import HFDraftForward, LlamaDraftForward
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.sampling import GREEDY, SamplingParams


def test_lean_step_equals_regular_forward(tiny_zoo):
    draft = tiny_zoo.fresh_draft("noisy")
    assert isinstance(draft.forward_impl, LlamaDraftForward), "Llama drafts should use the lean path"
    context = tiny_zoo.engine.encode("The robot moves to the kitchen")
    proposal = draft.propose(context, 5, GREEDY)
    full = context + proposal.tokens
    with torch.no_grad():
        logits = draft.model(input_ids=torch.tensor([full])).logits[0]
    reference = logits[len(context) - 1 : len(full) - 1].argmax(-1).tolist()
    assert proposal.tokens == reference

    # Probabilities too (sampling path), compared row by row with the regular forward.
    sampler_draft = tiny_zoo.fresh_draft("noisy")
    params = SamplingParams(temperature=1.0, seed=3)
    proposal = sampler_draft.propose(context, 4, params, params.make_generator())
    full = context + proposal.tokens
    with torch.no_grad():
        logits = sampler_draft.model(input_ids=torch.tensor([full])).logits[0]
    expected = torch.softmax(logits[len(context) - 1 : len(full) - 1].float(), -1)
    torch.testing.assert_close(proposal.draft_probs, expected, atol=1e-5, rtol=1e-4)


def test_catchup_is_counted_only_for_unseen_context(tiny_zoo):
    draft = tiny_zoo.fresh_draft("noisy")
    context = tiny_zoo.engine.encode("The robot moves")
    first = draft.propose(context, 3, GREEDY)
    assert first.catchup_tokens == len(context) - 1 and first.catchup_seconds > 0
    # All proposals accepted + bonus token: feeding the last proposal and the bonus is ordinary.
    context = context + first.tokens + [7]
    assert draft.propose(context, 3, GREEDY).catchup_tokens == 0
    # One rejected proposal replaced by a correction: ordinary as well.
    second_tokens = draft.seen_tokens[len(context):]
    context = context + second_tokens[:1] + [9]
    assert draft.propose(context, 3, GREEDY).catchup_tokens == 0
    # Five tokens the draft never saw (e.g. other drafts' rounds): four beyond the newest one.
    context = [*context, 11, 12, 13, 14, 15]
    assert draft.propose(context, 3, GREEDY).catchup_tokens == 4


def test_switching_back_reuses_shared_prefix(tiny_zoo):
    draft = tiny_zoo.fresh_draft("random")
    context = tiny_zoo.engine.encode("def add(a, b):")
    draft.propose(context, 4, GREEDY)
    diverged = [*context[:3], 20, 21]
    proposal = draft.propose(diverged, 2, GREEDY)
    assert proposal.catchup_tokens == 1  # 2 new tokens after the 3 shared ones
    assert draft.seen_tokens[:5] == diverged


def test_proposals_respect_draft_context_limit(tiny_zoo):
    model = tiny_zoo.drafts["random"].model
    draft = DraftProposer(model, "random")
    limit = draft.max_positions
    assert draft.propose([5] * (limit - 2), 6, GREEDY).tokens.__len__() == 2
    assert draft.propose([5] * limit, 6, GREEDY).tokens == []


@pytest.mark.parametrize("tied", [False, True])
def test_functional_llama_forward_matches_transformers(tiny_zoo, tied):
    """Block feeds, single steps, rollback and regrowth agree with the HF implementation."""
    model = tiny_zoo.drafts["noisy"].model if not tied else tiny_llama(tiny_zoo.vocab, 32, 2, seed=9)
    if tied:
        model.config.tie_word_embeddings = True
        model = type(model)(model.config).eval()
    fast, slow = LlamaDraftForward(model), HFDraftForward(model)
    fast.INITIAL_CAPACITY = 8  # force buffer growth inside the test
    blocks = [list(range(3, 20)), [40], [41], [42, 43, 44], [45]]
    for step, block in enumerate(blocks):
        torch.testing.assert_close(fast.feed(block), slow.feed(block), atol=1e-5, rtol=1e-4)
        if step == 2:
            fast.truncate(10)
            slow.truncate(10)
            torch.testing.assert_close(fast.feed([7, 8]), slow.feed([7, 8]), atol=1e-5, rtol=1e-4)
        assert fast.length == slow.length
    for (fk, fv), (sk, sv) in zip(fast.kv(), slow.kv(), strict=True):
        torch.testing.assert_close(fk, sk, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(fv, sv, atol=1e-5, rtol=1e-4)
    assert fast.cache_nbytes() > 0
    fast.truncate(0)
    slow.truncate(0)
    torch.testing.assert_close(fast.feed([5, 6]), slow.feed([5, 6]), atol=1e-5, rtol=1e-4)
