"""Code corpus: the CPython standard library sources of the local Python install.

Why the stdlib: it is offline, PSF-licensed, idiomatic Python, and large enough (a few MB)
for a small draft. Data-table modules (codec maps, generated tables) are skipped because they
are mostly numeric literals and would teach the model to emit hex tables.

The first ``MAX_TOTAL_BYTES`` (in sorted path order) form the domain corpus that is split into
train and held-out documents. The rest of the stdlib (``build_extra_documents``, ~6 MB) is
*train-only* extra code for the target's last phase: the first 3 MB were seen ~5 times and the
target overfitted them (train loss 2.4, held-out 3.9). Keeping it separate leaves the split,
the held-out prompts and the tokenizer sample exactly as they were.
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


def _all_documents() -> list[str]:
    """Every usable stdlib ``*.py`` file, one document each, in sorted path order."""
    root = stdlib_root()
    docs: list[str] = []
    for path in sorted(root.rglob("*.py")):
        if any(part in SKIP_DIRS for part in path.relative_to(root).parts):
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace").replace("\t", "    ")
        if len(text) < 300 or _looks_like_data_table(text):
            continue
        docs.append(text)
    return docs


def _cap_index(docs: list[str]) -> int:
    """Number of leading documents that make up the first ``MAX_TOTAL_BYTES``."""
    total = 0
    for i, doc in enumerate(docs):
        total += len(doc)
        if total >= MAX_TOTAL_BYTES:
            return i + 1
    return len(docs)


def build_documents(seed: int = 0) -> list[str]:
    """The domain corpus: stdlib files in sorted path order up to ``MAX_TOTAL_BYTES``."""
    del seed  # the file list is deterministic already
    docs = _all_documents()
    return docs[:_cap_index(docs)]


def build_extra_documents() -> list[str]:
    """The stdlib files past the cap: extra training code that is never held out."""
    docs = _all_documents()
    return docs[_cap_index(docs):]
