"""The validation slice and the checkpoint selection the drafts' KL phases use.

Why: on a small corpus a draft memorises its training text and more distillation makes it
worse on new text (docs/own_models.md, languages example); each KL phase therefore scores
the draft on the target's continuations of validation documents and keeps its best weights.
A validation slice that overlapped the training documents, a score that did not measure
agreement with the target, or a phase that saved its last weights instead of its best would
each undo that silently. Tiny randomly initialised Llamas (real transformers models) keep it fast.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import LlamaForCausalLM

from memspec_ros.builder.continuations import ContinuationPool
from memspec_ros.builder.corpora import split_validation
from memspec_ros.builder.distillation import distill
from memspec_ros.builder.training_loop import TrainSpec
from memspec_ros.builder.validation import AgreementCheck, continuation_rows
from memspec_ros.builder.windows import WindowSampler

from .tiny_llama import tiny_llama

PREFIX, NEW = 6, 9


_tiny_model = tiny_llama


def _stream(seed: int = 5, n: int = 2000) -> np.ndarray:
    return np.random.default_rng(seed).integers(3, 64, size=n).astype(np.uint16)


def test_validation_documents_are_a_tenth_of_the_training_documents_and_never_trained_on() -> None:
    train = [f"doc {i}" for i in range(95)]
    fit, val = split_validation(train, seed=3)
    assert len(val) == 10 and len(fit) == 85 and sorted(fit + val) == sorted(train) and not set(fit) & set(val)
    assert split_validation(train, seed=3) == (fit, val)  # reproducible
    assert split_validation(train, seed=4) != (fit, val)  # seeded by the domain
    assert split_validation(["a", "b"], seed=0)[1] in (["a"], ["b"])  # at least one document
    assert split_validation(["only"], seed=0) == (["only"], [])  # nothing to spare


def test_the_target_agrees_with_its_own_continuations_and_another_model_does_not() -> None:
    target = _tiny_model(0)
    rows = continuation_rows(target, _stream(), rows=8, prefix=PREFIX, new_tokens=NEW, seed=1)
    assert rows is not None and rows.shape == (8, PREFIX + NEW)
    check = AgreementCheck(rows, PREFIX, batch=3)  # batches of 3, 3, 2 rows
    assert check(target) == 1.0
    assert check(_tiny_model(1)) < 0.5
    assert continuation_rows(target, _stream(n=PREFIX), rows=8, prefix=PREFIX, new_tokens=NEW, seed=1) is None


def test_a_phase_keeps_its_best_weights_not_its_last(tmp_path: Path) -> None:
    target, student = _tiny_model(0), _tiny_model(1, hidden=16)
    start = {k: v.clone() for k, v in student.state_dict().items()}

    def closeness_to_start(model: LlamaForCausalLM) -> float:
        """Best where training began: every step moves the weights away from it."""
        return -sum(float((v - start[k]).norm()) for k, v in model.state_dict().items())

    sampler = WindowSampler({"d": _stream()}, {"d": 1.0}, PREFIX + NEW - 1, 8, 0)
    spec = TrainSpec(1.5, 1e-2, 8, PREFIX + NEW - 1, 0, log_every=10_000)
    stats = distill(student, target, sampler, spec, tmp_path / "student", "test", check=closeness_to_start,
                    checks=5)
    assert stats["steps"] > 0 and stats["validation_end"] < 0.0  # training did move the weights
    assert stats["validation_best"] == 0.0 and stats["validation_best_at_s"] == 0.0
    saved = LlamaForCausalLM.from_pretrained(tmp_path / "student", dtype=torch.float32).state_dict()
    assert all(torch.equal(saved[k], start[k]) for k in start)


def test_selection_by_agreement_keeps_the_phase_that_agrees_most(tmp_path: Path) -> None:
    target, student = _tiny_model(0), _tiny_model(1, hidden=16)
    check = AgreementCheck(continuation_rows(target, _stream(9), 16, PREFIX, NEW, seed=2), PREFIX)
    pool = ContinuationPool(target, WindowSampler({"d": _stream()}, {"d": 1.0}, PREFIX - 1, 4, 0),
                            batches=4, new_tokens=NEW, batch=8, seed=0)
    before = check(student)
    spec = TrainSpec(3.0, 1e-2, 8, PREFIX + NEW - 1, 0, log_every=10_000)
    stats = distill(student, target, pool, spec, tmp_path / "student", "test", check=check, checks=6)
    assert stats["validation_start"] == pytest.approx(before, abs=1e-4) and stats["validation_best"] > before
    assert check(student) == pytest.approx(stats["validation_best"], abs=1e-4)  # the best weights were kept
    assert stats["validation_best"] >= stats["validation_end"]
