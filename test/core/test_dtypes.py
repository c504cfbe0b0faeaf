"""float32, bfloat16 and float16: the output is the target's own at the dtype it runs in.

Low precision changes the target itself (its greedy output in fp16 is not its fp32 output), so
the claim is relative to the same dtype and device: speculative greedy output equals the
target's own greedy decoding, both ``generate()`` and the engine's target-only rounds. Exact
logit ties, which low precision makes common (bf16 logits of these models come in steps of 1/16),
may resolve differently between a block forward and single steps, and after one the two
continuations are different texts; so outputs are compared up to the first exact tie of the
reference, and the test requires that most of the reference is tie-free.
"""

from __future__ import annotations

import pytest
import torch
from conftest import train_tokenizer
from tiny_architectures import tiny_model

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.model_loading import load_causal_lm
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.sampling import SamplingParams

PROMPTS = ("The robot moves", "def add(a, b):", "Solve 3x + 5 = 20")
LOW_PRECISION = (torch.float16, torch.bfloat16)


def tie_free_length(model, prompt_ids: list[int], reference: list[int]) -> int:
    """How many reference tokens precede the first position whose top two logits are equal."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt_ids + reference])).logits[0, len(prompt_ids) - 1:-1]
    top = logits.float().topk(2, dim=-1).values
    ties = (top[:, 0] == top[:, 1]).nonzero()
    return int(ties[0]) if len(ties) else len(reference)


@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_greedy_output_is_the_targets_own_at_low_precision(tiny_zoo, dtype):
    root = tiny_zoo.root
    target = load_causal_lm(root / "target", dtype=dtype, allowed_roots=[root])
    assert target.dtype == dtype
    engine = SpeculativeEngine(target, tiny_zoo.engine.tokenizer)
    drafts = {name: load_causal_lm(root / f"draft-{name}", dtype=dtype, allowed_roots=[root])
              for name in ("noisy", "exact", "random")}
    compared = 0
    for prompt in PROMPTS:
        reference = engine.target_greedy(prompt, 24)
        n = tie_free_length(target, engine.encode(prompt), reference)
        compared += n
        assert engine.generate(prompt, None, max_new_tokens=24).output_ids[:n] == reference[:n], prompt
        for name, model in drafts.items():
            session = engine.generate(prompt, DraftProposer(model, name), k=3, max_new_tokens=24)
            assert session.output_ids[:n] == reference[:n], (dtype, name, prompt)
    assert compared >= 2 * 24, "most of the references should be tie-free, or this proves little"


@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_soft_capped_sliding_window_target_at_low_precision(dtype):
    """The generic paths (Gemma 2 target and drafts) in low precision, past the sliding window."""
    tokenizer = train_tokenizer(320)
    vocab = len(tokenizer)
    target = tiny_model("gemma2", vocab, seed=40).to(dtype)
    engine = SpeculativeEngine(target, tokenizer)
    compared = 0
    for prompt in PROMPTS:
        reference = engine.target_greedy(prompt, 20)
        n = tie_free_length(target, engine.encode(prompt), reference)
        compared += n
        for draft in (tiny_model("gpt2", vocab, seed=41), tiny_model("llama", vocab, seed=42)):
            session = engine.generate(prompt, DraftProposer(draft.to(dtype), "d"), k=3, max_new_tokens=20)
            assert session.output_ids[:n] == reference[:n], (dtype, type(draft).__name__, prompt)
    assert compared >= 2 * 20, "most of the references should be tie-free, or this proves little"


@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_probabilities_are_computed_in_float32(tiny_zoo, dtype):
    """Logits leave the models as float32, so softmax and the acceptance ratio never run in fp16."""
    root = tiny_zoo.root
    engine = SpeculativeEngine(load_causal_lm(root / "target", dtype=dtype, allowed_roots=[root]),
                               tiny_zoo.engine.tokenizer)
    draft = DraftProposer(load_causal_lm(root / "draft-noisy", dtype=dtype, allowed_roots=[root]), "noisy")
    params = SamplingParams(temperature=0.7, top_p=0.9, seed=5)
    session = engine.start(PROMPTS[0], 30, params)
    proposal = draft.propose(session.token_ids, 4, params, session.generator)
    assert proposal.draft_probs.dtype == torch.float32
    assert session.scorer.score([session.token_ids[-1]]).logits.dtype == torch.float32
    session.scorer.rollback(1)
    while not session.done:
        session.step(draft, 4)
    assert len(session.output_ids) == 30
