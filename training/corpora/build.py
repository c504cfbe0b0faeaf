"""Build every domain corpus and write ``<domain>.train.jsonl`` / ``<domain>.heldout.jsonl``.

The target trains on the train split (and the code domain's train-only extra documents).
``all/<domain>.jsonl`` holds every document of the domain (train, held-out, extra): what
``make zoo`` hands to ``memspec_build``, which splits the corpora again by its own seeds for
the drafts and the predictor (docs/zoo.md says what that means for the evaluation prompts).
"""
from __future__ import annotations

import importlib
import time
from pathlib import Path

from training.corpora.split import read_jsonl, split_documents, write_jsonl
from training.paths import CORPUS_DIR, DOMAINS

SEED = 1234


def corpus_path(domain: str, split: str) -> Path:
    """Path of a domain's split file (``train``, ``heldout``, the train-only ``extra``, or ``all``)."""
    if split == "all":
        return CORPUS_DIR / "all" / f"{domain}.jsonl"
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
    write_build_inputs()


def write_build_inputs() -> None:
    """Write ``all/<domain>.jsonl``: train, held-out and (code) extra documents, in that order.

    Always rewritten (seconds): a domain rebuilt above must not leave ``memspec_build`` an old copy.
    """
    for domain in DOMAINS:
        splits = ("train", "heldout", "extra") if domain == "code" else ("train", "heldout")
        write_jsonl(corpus_path(domain, "all"),
                    [doc for split in splits for doc in read_jsonl(corpus_path(domain, split))])


def build_extra(force: bool = False) -> None:
    """Write the train-only extra corpora (``<domain>.extra.jsonl``, outside the split)."""
    from training.corpora.code import build_extra_documents
    path = corpus_path("code", "extra")
    if force or not path.exists():
        docs = build_extra_documents()
        write_jsonl(path, docs)
        print(f"[corpus] code extra (train only): {len(docs)} docs, "
              f"{sum(map(len, docs)) / 1e6:.2f} MB", flush=True)
