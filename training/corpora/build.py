"""Build every domain corpus and write ``<domain>.train.jsonl`` / ``<domain>.heldout.jsonl``."""
from __future__ import annotations

import importlib
import time
from pathlib import Path

from training.corpora.split import split_documents, write_jsonl
from training.paths import CORPUS_DIR, DOMAINS

SEED = 1234


def corpus_path(domain: str, split: str) -> Path:
    """Path of a domain's split file (``train``, ``heldout``, or the train-only ``extra``)."""
    return CORPUS_DIR / f"{domain}.{split}.jsonl"


def build_all(force: bool = False) -> None:
    """Build each missing corpus; ``force`` rebuilds all of them."""
    for i, domain in enumerate(DOMAINS):
        if not force and corpus_path(domain, "heldout").exists():
            continue
        t0 = time.time()
        module = importlib.import_module(f"training.corpora.{domain}")
        docs = module.build_documents(seed=SEED + i)
        train, held = split_documents(docs, seed=SEED + i)
        write_jsonl(corpus_path(domain, "train"), train)
        write_jsonl(corpus_path(domain, "heldout"), held)
        print(f"[corpus] {domain}: {len(train)} train / {len(held)} held-out docs, "
              f"{sum(map(len, docs)) / 1e6:.2f} MB, {time.time() - t0:.0f} s", flush=True)
    build_extra(force)


def build_extra(force: bool = False) -> None:
    """Write the train-only extra corpora (``<domain>.extra.jsonl``, outside the split)."""
    from training.corpora.code import build_extra_documents
    path = corpus_path("code", "extra")
    if force or not path.exists():
        docs = build_extra_documents()
        write_jsonl(path, docs)
        print(f"[corpus] code extra (train only): {len(docs)} docs, "
              f"{sum(map(len, docs)) / 1e6:.2f} MB", flush=True)
