"""The zoo's corpora and target: ``python -m training.build_zoo`` (the first half of ``make zoo``).

Stages run in order and each skips itself when its output already exists, so an interrupted
build resumes where it stopped. ``--stages`` re-runs a subset, ``--force`` ignores finished
outputs of the selected stages. Only one torch job runs at a time (2-core machine).

The drafts, the predictor and their evaluation are not built here: ``make zoo`` then runs
``memspec_build`` on the target exported to ``models/zoo/target`` and on the corpora in
``.cache/zoo/corpora/all``, exactly as a user builds a catalogue for their own target.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import time

import torch
from transformers.utils import logging as hf_logging

from training.paths import CHECKPOINT_DIR, TOKENIZER_DIR

STAGES: tuple[str, ...] = ("corpora", "tokenizer", "target", "target_extend", "target_polish", "export")


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


def _stage_export(force: bool) -> None:
    from training.members import TARGET_CHECKPOINT
    from training.paths import ZOO_DIR
    from training.target_export import export_target, write_target_report
    report = ZOO_DIR / "reports" / "target.json"
    trained = CHECKPOINT_DIR / TARGET_CHECKPOINT / "model.safetensors"
    if not trained.exists():
        if force or not report.exists():
            raise SystemExit(f"no trained target at {trained.parent}: run the target stages first "
                             "(python -m training.build_zoo --stages target target_extend target_polish export)")
        print("[build_zoo] no target trained on this machine: the committed models/zoo/target stays", flush=True)
        return
    # the exported target is replaced when this machine trained another one (by content, not by date)
    digest = hashlib.sha256(trained.read_bytes()).hexdigest()
    recorded = json.loads(report.read_text()).get("checkpoint_sha256") if report.exists() else None
    if force or recorded != digest:
        export_target()
        write_target_report(checkpoint_sha256=digest)


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
