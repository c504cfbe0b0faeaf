"""Inference step timing; moved to :mod:`memspec_ros.builder.step_timing` (shared with
``memspec_build``, which sizes drafts by it)."""
from __future__ import annotations

from memspec_ros.builder.step_timing import step_ms

__all__ = ["step_ms"]
