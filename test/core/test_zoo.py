"""The trained zoo, loaded through the public loading code: lossless decoding with real drafts.

Skipped (with the reason) until ``models/zoo`` holds the target and all six drafts.
"""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from conftest import ZOO, ZOO_DRAFTS
from transformers import GenerationConfig

from memspec_ros.core.model_loading import (
    build_empty_model,
    load_config,
    load_state_from_bytes,
    weight_files,
    weights_nbytes,
)
from memspec_ros.core.sampling import GREEDY, SamplingParams
from training.target_export import LOOP_RATIO, distinct_ngram_ratio

PROMPTS = {
    "robot": "USER: Please bring the red cup to the kitchen.\nROBOT:",
    "code": "def read_lines(path):\n    with open(path) as fh:\n",
    "math": "Solve for x: 3*x + 5 = 20.\n",
    "legal": "Permission is hereby granted, free of charge, to any person obtaining a copy",
    "prose": "The old man looked at the sea and said",
    "general": "USER: What is the derivative of x**2?\nROBOT:",
}


@pytest.mark.parametrize("draft", ZOO_DRAFTS)
def test_zoo_draft_is_lossless(zoo_engine, draft):
    engine, drafts = zoo_engine
    for prompt in (PROMPTS[draft], PROMPTS["robot"]):
        reference = engine.target_greedy(prompt, 40)
        session = engine.generate(prompt, drafts[draft], k=4, max_new_tokens=40)
        assert session.output_ids == reference, (draft, prompt)


def test_zoo_switching_every_few_rounds_is_lossless(zoo_engine):
    engine, drafts = zoo_engine
    schedule = itertools.cycle([*ZOO_DRAFTS, None])
    for prompt in (PROMPTS["code"], PROMPTS["legal"]):
        reference = engine.target_greedy(prompt, 64)
        session = engine.start(prompt, 64, GREEDY)
        rounds, name = 0, None
        while not session.done:
            if rounds % 2 == 0:  # a different draft (or none) every two rounds
                name = next(schedule)
            session.step(drafts[name] if name else None, 3 + rounds % 3)
            rounds += 1
        assert session.output_ids == reference, prompt


def test_zoo_drafts_accept_in_their_own_domain(zoo_engine):
    """Sanity of the zoo and the engine together: a matched draft gets real acceptance."""
    engine, drafts = zoo_engine
    session = engine.generate(PROMPTS["robot"], drafts["robot"], k=4, max_new_tokens=48)
    accepted = sum(s.accepted for s in session.stats)
    proposed = sum(s.proposed for s in session.stats)
    assert accepted / proposed > 0.2


def test_zoo_sampling_is_reproducible(zoo_engine):
    engine, drafts = zoo_engine
    params = SamplingParams(temperature=0.8, top_p=0.95, seed=11)
    runs = [engine.generate(PROMPTS["math"], drafts["math"], k=4, max_new_tokens=24, params=params).output_ids
            for _ in range(2)]
    assert runs[0] == runs[1]


def test_zoo_sizes_and_byte_loading(zoo_engine):
    engine, drafts = zoo_engine
    sizes = {d: weights_nbytes(ZOO / f"draft-{d}", allowed_roots=[ZOO]) for d in ZOO_DRAFTS}
    assert len(set(sizes.values())) > 1, "drafts should differ in size"
    assert all(size < weights_nbytes(ZOO / "target") for size in sizes.values())
    path = ZOO / "draft-code"
    built = build_empty_model(load_config(path, allowed_roots=[ZOO]))
    load_state_from_bytes(built, [f.read_bytes() for f in weight_files(path)])
    ids = torch.tensor([engine.encode(PROMPTS["code"])])
    with torch.no_grad():
        torch.testing.assert_close(built(ids).logits, drafts["code"].model(ids).logits)


def test_zoo_target_repetition_matches_published_figures(zoo_engine):
    """The target's greedy quality as recorded in ``models/zoo/reports/target.json`` (and published
    in ``docs/zoo.md``) holds for the shipped weights, decoded with plain ``transformers.generate``
    through the public loading code: per domain, the number of the report's prompts (cut from
    the target's own held-out documents) whose 64-token continuation loops (fewer than half of
    its 4-grams distinct; real 64-token held-out windows have a median ratio of 0.95-1.0) equals
    the recorded count, and no domain has more than one looping prompt. (The bar was "none" on
    the earlier prompt set; the prompt cutter since replaces look-alike openings by later
    lines, and one of the new legal prompts loops: docs/zoo.md.)

    The prompts are decoded in left-padded batches of one domain (a 120-prompt loop of
    single generations was the slowest test of the suite by far); a batch can break an exact
    logit tie differently from a single generation, which a count of loops does not notice.
    """
    engine, _ = zoo_engine
    path = ZOO / "reports" / "target.json"
    assert path.exists(), f"the zoo at {ZOO} lacks its target report (training.build_zoo's export stage writes it)"
    recorded = json.loads(path.read_text())["repetition"]
    loops: dict[str, list[str]] = {d: [] for d in recorded}
    for domain, record in recorded.items():
        for out in _batched_greedy(engine, record["prompts"], 64):
            out = [t for t in out if t not in engine.eos_token_ids]
            if distinct_ngram_ratio(out) < LOOP_RATIO:
                loops[domain].append(engine.tokenizer.decode(out)[:80])
    assert {d: len(v) for d, v in loops.items()} == {d: r["loops"] for d, r in recorded.items()}, loops
    assert all(len(v) <= 1 for v in loops.values()), loops


def _batched_greedy(engine, prompts: list[str], max_new_tokens: int) -> list[list[int]]:
    """``transformers.generate`` greedy continuations of several prompts in one left-padded batch."""
    eos = sorted(engine.eos_token_ids)
    pad = eos[0] if eos else 0
    ids = [engine.encode(p) for p in prompts]
    width = max(map(len, ids))
    input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids])
    mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids])
    config = GenerationConfig(do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=eos or None,
                              pad_token_id=pad)
    with torch.no_grad():
        out = engine.target.generate(input_ids=input_ids, attention_mask=mask, generation_config=config)
    return out[:, width:].tolist()
