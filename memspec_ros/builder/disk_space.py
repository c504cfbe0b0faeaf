"""Refusing to start a step that cannot fit on the disk.

A draft build that fills the disk dies hours in, possibly mid-write of a checkpoint; checking
``shutil.disk_usage`` against a generous estimate of what the step writes costs nothing and
turns that into an error before any work, saying how much is needed.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from memspec_ros.builder.errors import BuildError

MARGIN_BYTES = 64 << 20
"""Head room for stamps, reports, logs and estimation error."""


def _existing_ancestor(path: Path) -> Path:
    path = path.resolve()
    while not path.exists():
        path = path.parent
    return path


def require_free_space(folder: Path, needed_bytes: int, what: str) -> None:
    """Raise :class:`BuildError` unless ``folder``'s filesystem has ``needed_bytes`` + a margin free."""
    free = shutil.disk_usage(_existing_ancestor(folder)).free
    needed = int(needed_bytes) + MARGIN_BYTES
    if free < needed:
        raise BuildError(
            f"not enough disk space for {what} in {folder}: about {needed / 1e6:.0f} MB needed, "
            f"{free / 1e6:.0f} MB free; free some space or choose another --out")
