"""KL distillation of a draft toward the target; moved to :mod:`memspec_ros.builder.distillation`
(shared with ``memspec_build``)."""
from __future__ import annotations

from memspec_ros.builder.distillation import BatchSource, distill, kl_loss

__all__ = ["BatchSource", "distill", "kl_loss"]
