"""Which prompts the predictor was trained on, so that the evaluation never uses them.

How the split is made, in two layers:

1. **By document**: every domain's corpus is split 95/5 into training and held-out
   *documents* with a fixed seed by ``memspec_build drafts``. The evaluation prompts
   (``heldout/prompts.jsonl`` beside the catalogue) are cut from held-out documents only;
   the predictor's training prompts are cut, by the same procedure, from training documents
   only (``memspec_build predictor``).
2. **By text** (this module): a document split does not stop two different documents from
   containing the same short text - the robot corpus is generated from a grammar, and Debian
   copyright files share boilerplate lines - so a held-out prompt can be *textually identical*
   to a prompt the predictor was trained on.
   The benchmark drops every held-out prompt whose text equals a predictor-training prompt.

The predictor's training prompts are recovered from its **training report**,
``reports/predictor.json`` in the predictor's catalogue folder (``memspec_build predictor``
writes it; the bundled zoo is built by the same tool): its ``train_prompt_sha1`` lists their
hashes. A report whose ``file_bytes`` or ``predictor_sha1`` does not match the predictor file
belongs to another training run and is not used.

Rebuilding the prompts from the corpora is deliberately not attempted: any drift in the
prompt-cutting code would silently give a different list. Without a matching report only the
document-level split protects the evaluation, and the results say so.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path


def prompt_hash(text: str) -> str:
    """Identity of a prompt's exact text."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TrainingPrompts:
    """The predictor's training prompts (as hashes) and where they were recovered from."""

    hashes: frozenset[str]
    source: str
    predictor_key: dict[str, object]

    def __contains__(self, prompt: object) -> bool:
        return isinstance(prompt, str) and prompt_hash(prompt) in self.hashes


def predictor_key(predictor_path: Path) -> dict[str, object]:
    """What identifies a trained predictor: its file's hash plus the training metadata it carries."""
    from safetensors import safe_open

    with safe_open(str(predictor_path), "np") as fh:
        meta = json.loads((fh.metadata() or {}).get("meta", "{}"))
    key = {k: meta.get(k) for k in ("models", "seed", "sessions", "validation_sessions", "turns", "max_new_tokens")
           if k in meta}
    key["predictor_sha1"] = hashlib.sha1(Path(predictor_path).read_bytes()).hexdigest()
    return key


def training_report(predictor_path: Path) -> Path:
    """Where ``memspec_build predictor`` writes the report of the predictor at ``predictor_path``."""
    return Path(predictor_path).parent / "reports" / "predictor.json"


def _from_training_report(key: dict[str, object], predictor_path: Path) -> set[str] | None:
    """The report's ``train_prompt_sha1`` if the report belongs to this predictor file."""
    try:
        report = json.loads(training_report(predictor_path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict) or not isinstance(report.get("train_prompt_sha1"), list):
        return None
    if report.get("file_bytes") != Path(predictor_path).stat().st_size:
        return None  # written for another predictor file
    if report.get("predictor_sha1", key["predictor_sha1"]) != key["predictor_sha1"]:
        return None
    return set(report["train_prompt_sha1"])


def load_training_prompts(predictor_path: Path) -> TrainingPrompts:
    """Recover the predictor's training prompts from its training report (module docstring)."""
    key = predictor_key(predictor_path)
    reported = _from_training_report(key, predictor_path)
    if reported is not None:
        return TrainingPrompts(frozenset(reported), f"predictor training report {training_report(predictor_path)}",
                               key)
    return TrainingPrompts(frozenset(), "unavailable (document-level split only)", key)
