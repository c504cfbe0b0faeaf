"""The pool of the target's own continuations that the drafts' second distillation runs on.

Why: the drafts are distilled on these rows because they are what the target writes; a pool
whose continuations were not the target's greedy output (a cache bug, an off-by-one at the
prefix seam) would distil the drafts toward the wrong text without any error. A tiny randomly
initialised Llama (a real transformers model) and a real :class:`WindowSampler` keep it fast.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from memspec_ros.builder.continuations import ContinuationPool
from memspec_ros.builder.distillation import distill
from memspec_ros.builder.training_loop import TrainSpec
from memspec_ros.builder.windows import WindowSampler

from .tiny_llama import tiny_llama

PREFIX, NEW = 6, 9


_tiny_model = tiny_llama


def _prefixes(seed: int = 0) -> WindowSampler:
    stream = np.random.default_rng(5).integers(3, 64, size=2000).astype(np.uint16)
    return WindowSampler({"d": stream}, {"d": 1.0}, PREFIX - 1, 4, seed)


def test_rows_are_training_prefixes_followed_by_the_targets_greedy_tokens() -> None:
    target = _tiny_model(0)
    pool = ContinuationPool(target, _prefixes(), batches=2, new_tokens=NEW, batch=3, seed=0)
    sampler = _prefixes()
    assert pool.rows.shape == (8, PREFIX + NEW)
    assert torch.equal(pool.rows[:, :PREFIX], torch.cat([sampler.next(), sampler.next()]))
    with torch.no_grad():
        for row in pool.rows.tolist():
            ids = row[:PREFIX]
            for _ in range(NEW):
                ids.append(int(target(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
            assert row == ids


def test_batches_are_drawn_from_the_pool_reproducibly() -> None:
    target = _tiny_model(0)
    a = ContinuationPool(target, _prefixes(), batches=2, new_tokens=NEW, batch=3, seed=7)
    b = ContinuationPool(target, _prefixes(), batches=2, new_tokens=NEW, batch=3, seed=7)
    pool_rows = {tuple(r) for r in a.rows.tolist()}
    for _ in range(4):
        x, y = a.next(), b.next()
        assert x.shape == (3, PREFIX + NEW) and torch.equal(x, y)
        assert all(tuple(r) in pool_rows for r in x.tolist())


def test_distilling_on_the_pool_raises_agreement_with_the_target(tmp_path: Path) -> None:
    target, student = _tiny_model(0), _tiny_model(1, hidden=16)
    pool = ContinuationPool(target, _prefixes(), batches=4, new_tokens=NEW, batch=8, seed=0)

    def agreement() -> float:
        with torch.no_grad():
            x = pool.rows[:, :-1]
            return float((student(input_ids=x).logits.argmax(-1)
                          == target(input_ids=x).logits.argmax(-1)).float().mean())

    before = agreement()
    spec = TrainSpec(3.0, 1e-2, 8, PREFIX + NEW - 1, 0, log_every=10_000)
    distill(student, target, pool, spec, tmp_path / "student", "test")
    assert agreement() > before + 0.1
