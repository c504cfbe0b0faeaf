"""Single entry point that rebuilds the whole zoo: ``python -m training.build_zoo``.

Stages run in order and each skips itself when its output already exists, so an interrupted
build resumes where it stopped. ``--stages`` re-runs a subset, ``--force`` ignores finished
outputs of the selected stages. Only one torch job runs at a time (2-core machine).
"""
from __future__ import annotations

import argparse
import time

import torch
from transformers.utils import logging as hf_logging

from training.paths import CHECKPOINT_DIR, TOKENIZER_DIR

STAGES: tuple[str, ...] = ("corpora", "tokenizer", "target", "target_extend", "target_polish",
                           "drafts", "distill", "export", "evaluate")


def _stage_corpora(force: bool) -> None:
    from training.corpora.build import build_all
    build_all(force=force)


def _stage_tokenizer(force: bool) -> None:
    from training.data import token_stream
    from training.paths import DOMAINS
    from training.tokenizer import load_tokenizer, train_tokenizer
    tok = train_tokenizer() if force or not (TOKENIZER_DIR / "tokenizer.json").exists() \
        else load_tokenizer()
    for domain in DOMAINS:
        for split in ("train", "heldout"):
            token_stream(domain, tok, split)
    token_stream("code", tok, "extra")


def _stage_target(force: bool) -> None:
    from training.members import train_target
    if force or not (CHECKPOINT_DIR / "target" / "model.safetensors").exists():
        train_target()


def _stage_target_extend(force: bool) -> None:
    from training.members import extend_target
    if force or not (CHECKPOINT_DIR / "target-extended" / "train_stats.json").exists():
        extend_target()


def _stage_target_polish(force: bool) -> None:
    from training.members import polish_target
    polish_target(force)


def _stage_drafts(force: bool) -> None:
    from training.members import DRAFT_NAMES, train_draft
    for name in DRAFT_NAMES:
        if force or not (CHECKPOINT_DIR / f"draft-{name}" / "model.safetensors").exists():
            train_draft(name)


def _stage_distill(force: bool) -> None:
    from training.members import DISTILLED_NAMES, distill_draft
    for name in DISTILLED_NAMES:
        if force or not (CHECKPOINT_DIR / f"distilled-{name}" / "model.safetensors").exists():
            distill_draft(name)


def _stage_export(force: bool) -> None:
    from training.export import export_all
    export_all()


def _stage_evaluate(force: bool) -> None:
    from training.evaluate import evaluate_zoo
    evaluate_zoo()


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and run the selected stages."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--force", action="store_true", help="redo finished stages too")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    hf_logging.disable_progress_bar()
    for stage in STAGES:
        if stage in args.stages:
            t0 = time.time()
            print(f"[build_zoo] stage {stage}", flush=True)
            globals()[f"_stage_{stage}"](args.force)
            print(f"[build_zoo] stage {stage} done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
