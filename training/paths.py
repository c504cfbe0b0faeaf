"""Filesystem locations of the zoo pipeline, in one place so every stage agrees on them.

Intermediate artefacts (corpora, token caches, fp32 checkpoints, logs) live under
``.cache/zoo`` (git-ignored); only the small final artefacts go under ``models/``.
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT: Path = Path(__file__).resolve().parent.parent
CACHE_DIR: Path = REPO_ROOT / ".cache" / "zoo"
CORPUS_DIR: Path = CACHE_DIR / "corpora"
TOKENIZER_DIR: Path = CACHE_DIR / "tokenizer"

# ZOO_SMOKE_ROOT redirects every *output* (checkpoints, the exported target) elsewhere, so a
# smoke run with tiny budgets (ZOO_TIME_SCALE) can exercise the pipeline without touching
# the real zoo. Corpora and tokenizer are shared: they are cheap and deterministic.
_OUT: Path | None = Path(os.environ["ZOO_SMOKE_ROOT"]) if os.environ.get("ZOO_SMOKE_ROOT") \
    else None
CHECKPOINT_DIR: Path = (_OUT or CACHE_DIR) / "checkpoints"
ZOO_DIR: Path = (_OUT or REPO_ROOT) / "models" / "zoo"

DOMAINS: tuple[str, ...] = ("robot", "code", "math", "legal", "prose")
"""The zoo's domains; each has a corpus (and, built by ``memspec_build``, a draft)."""

