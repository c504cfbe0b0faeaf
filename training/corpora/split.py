"""Document-level train/held-out split and the on-disk corpus format (JSON lines).

Splitting by document (not by position) keeps held-out text genuinely unseen: a fortune,
a source file or a licence is either entirely in training or entirely held out.
"""
from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable
from pathlib import Path

HELDOUT_FRACTION = 0.05


def split_documents(docs: list[str], seed: int) -> tuple[list[str], list[str]]:
    """Shuffle documents with ``seed`` and return ``(train, heldout)`` with a 95/5 split."""
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    n_held = max(2, math.ceil(len(docs) * HELDOUT_FRACTION))
    held = sorted(order[:n_held])
    train = sorted(order[n_held:])
    return [docs[i] for i in train], [docs[i] for i in held]


def write_jsonl(path: Path, docs: Iterable[str]) -> None:
    """Write one ``{"text": ...}`` object per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for doc in docs:
            fh.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")


def read_jsonl(path: Path) -> list[str]:
    """Read the ``text`` field of every line of a JSON-lines corpus file."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]
