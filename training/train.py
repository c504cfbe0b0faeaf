"""Budgeted next-token training; moved to :mod:`memspec_ros.builder.training_loop` (shared with
``memspec_build``, which is installed with the package and cannot import this folder)."""
from __future__ import annotations

from memspec_ros.builder.training_loop import (
    Objective,
    TrainSpec,
    lm_loss,
    make_optimizer,
    next_token_objective,
    train,
)

__all__ = ["Objective", "TrainSpec", "lm_loss", "make_optimizer", "next_token_objective", "train"]
