"""Wall-clock learning-rate schedule; moved to :mod:`memspec_ros.builder.schedule`
(``memspec_build`` is installed with the package and cannot import this folder)."""
from __future__ import annotations

from memspec_ros.builder.schedule import lr_at

__all__ = ["lr_at"]
