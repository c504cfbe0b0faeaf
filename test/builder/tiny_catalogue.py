"""A user's catalogue in miniature, built by ``memspec_build`` itself: drafts, predictor, evaluation.

Shared by the builder's own tests, the benchmark's test on a built catalogue and the node test
that serves one, so that all three exercise what the tool really writes (not a hand-made
folder). Budgets are tiny: the drafts are barely trained, which is fine for every check that
relies on it (losslessness does not depend on draft quality; the benchmark's shape does not
depend on its numbers). Import it as ``builder.tiny_catalogue`` with ``test/`` on ``sys.path``.
"""
from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import NamedTuple

from memspec_ros.builder.cli import main

from .user_inputs import write_corpora, write_target

TINY = ["--threads", "1"]
DRAFTS_TINY = [*TINY, "--time-budget-s", "4", "--seq-len", "32", "--batch", "4", "--distill-batch", "4",
               "--continuation-tokens", "12", "--validation-checks", "3"]
PREDICTOR_TINY = [*TINY, "--sessions", "3", "--validation-sessions", "1", "--turns", "2", "--max-new-tokens", "10",
                  "--time-budget-s", "60"]
EVALUATE_TINY = [*TINY, "--prompts-per-domain", "2", "--max-new-tokens", "12"]


class Built(NamedTuple):
    """What a build left behind: the output folder, the user's inputs and the drafts step's log."""

    out: Path
    target: Path
    corpora: dict[str, Path]
    drafts_log: str


def corpus_args(corpora: dict[str, Path]) -> list[str]:
    """``--corpus DOMAIN=PATH`` for every corpus, in order (the order of the prompts file's domains)."""
    return [arg for domain, path in corpora.items() for arg in ("--corpus", f"{domain}={path}")]


SUBSET_VOCAB = 64
"""``--draft-vocab`` of the subset builds: below the ~100 distinct tokens the corpora use (so some are 'other')."""


def build_tiny_catalogue(root: Path, *, evaluate: bool = True, draft_vocab: int = 0) -> Built:
    """``memspec_build drafts`` -> ``predictor`` (-> ``evaluate``) for a tiny Qwen2 target under ``root``.

    The catalogue is ``<root>/my_models/catalogue.yaml``; the target (``<root>/my-qwen``) is a
    random Qwen2 with its own byte-level BPE tokenizer (:mod:`.user_inputs`). ``draft_vocab``
    makes subset drafts (``--draft-vocab``; 0: over the target's whole vocabulary).
    """
    target = write_target(root / "my-qwen")
    corpora = write_corpora(root / "corpora")
    out = root / "my_models"
    buf = io.StringIO()
    vocab = ["--draft-vocab", str(draft_vocab)] if draft_vocab else []
    with contextlib.redirect_stdout(buf):
        code = main(["drafts", "--target", str(target), *corpus_args(corpora), "--out", str(out), *DRAFTS_TINY,
                     *vocab])
    assert code == 0, buf.getvalue()
    assert main(["predictor", "--out", str(out), *PREDICTOR_TINY]) == 0
    if evaluate:
        assert main(["evaluate", "--out", str(out), *EVALUATE_TINY]) == 0
    return Built(out, target, corpora, buf.getvalue())
