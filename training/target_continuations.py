"""The target's own greedy continuations as distillation inputs; moved to
:mod:`memspec_ros.builder.continuations` (shared with ``memspec_build``)."""
from __future__ import annotations

from memspec_ros.builder.continuations import ContinuationPool, greedy_batch

__all__ = ["ContinuationPool", "greedy_batch"]
