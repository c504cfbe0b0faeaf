"""Code corpus: the CPython standard library sources of the local Python install.

Why the stdlib: it is offline, PSF-licensed, idiomatic Python, and large enough (a few MB)
for a small draft. Data-table modules (codec maps, generated tables) are skipped because they
are mostly numeric literals and would teach the model to emit hex tables.
"""
from __future__ import annotations

import sysconfig
from pathlib import Path

SKIP_DIRS: frozenset[str] = frozenset(
    {"site-packages", "test", "tests", "idle_test", "encodings", "pydoc_data", "lib2to3",
     "__pycache__", "turtledemo", "ensurepip", "config-3.11-x86_64-linux-gnu"}
)
MAX_FILE_BYTES = 120_000
MAX_TOTAL_BYTES = 3_000_000


def stdlib_root() -> Path:
    """Locate the stdlib directory of the interpreter (works inside a venv)."""
    return Path(sysconfig.get_paths()["stdlib"])


def _looks_like_data_table(text: str) -> bool:
    """Heuristic: a module dominated by digits/hex escapes is a table, not code."""
    if not text:
        return True
    digits = sum(ch.isdigit() for ch in text)
    return digits / len(text) > 0.15 or text.count("\\x") > 200 or text.count("\\u") > 200


def build_documents(seed: int = 0) -> list[str]:
    """Return one document per stdlib ``*.py`` file, in sorted path order (deterministic)."""
    del seed  # the file list is deterministic already
    root = stdlib_root()
    docs: list[str] = []
    total = 0
    for path in sorted(root.rglob("*.py")):
        if any(part in SKIP_DIRS for part in path.relative_to(root).parts):
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace").replace("\t", "    ")
        if len(text) < 300 or _looks_like_data_table(text):
            continue
        docs.append(text)
        total += len(text)
        if total >= MAX_TOTAL_BYTES:
            break
    return docs
