"""Which prompts the predictor was trained on, so that the evaluation never uses them.

How the split is made, in two layers:

1. **By document**: every domain's corpus is split 95/5 into training and held-out
   *documents* with a fixed seed (the zoo: ``training/corpora/split.py``; a user's catalogue:
   ``memspec_build drafts``). The evaluation prompts (``models/heldout/prompts.jsonl``, or
   ``heldout/prompts.jsonl`` beside a built catalogue) are cut from held-out documents only;
   the predictor's training prompts are cut, by the same procedure, from training documents
   only (``scripts/train_predictor.py``, ``memspec_build predictor``).
2. **By text** (this module): a document split does not stop two different documents from
   containing the same short text - the robot corpus is generated from a grammar, and Debian
   copyright files share boilerplate lines - so a held-out prompt can be *textually identical*
   to a prompt the predictor was trained on (there are two such prompts in the shipped zoo).
   The benchmark drops every held-out prompt whose text equals a predictor-training prompt.

The predictor's training prompts are recovered, in this order, from:

* its recorded training traces (``.cache/predictor_traces``, named by the zoo fingerprint and
  seed in the predictor's metadata, written by the zoo's training script);
* ``bench/predictor_training_prompts.json``, the committed SHA-1 list of the bundled
  predictor's prompts, valid for the predictor it names by file hash (so that a fresh checkout
  builds the same workload; retraining the predictor makes it stale, which
  ``test/bench/test_bench_smoke.py`` reports). ``python -m bench.split --write`` regenerates it
  from the caches;
* the predictor's **training report** beside it, whose ``train_prompt_sha1`` lists the same
  hashes: ``reports/predictor.json`` in the predictor's folder (``memspec_build predictor``
  writes it, with the predictor file's SHA-1, which must match) or ``<predictor>.json`` (the
  zoo's ``models/zoo/predictor.json``). A report whose ``file_bytes`` or ``predictor_sha1``
  does not match the predictor belongs to another training run and is not used.

Rebuilding the prompts from the corpora is deliberately not attempted: any drift in the
prompt-cutting code would silently give a different list. Without any of these sources only
the document-level split protects the evaluation, and the results say so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
COMMITTED = Path(__file__).resolve().parent / "predictor_training_prompts.json"
TRACE_CACHE = REPO / ".cache" / "predictor_traces"


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


def predictor_meta(predictor_path: Path) -> dict[str, object]:
    """The training metadata saved inside ``predictor.safetensors`` (seed, sessions, zoo...)."""
    from safetensors import safe_open

    with safe_open(str(predictor_path), "np") as fh:
        meta = fh.metadata() or {}
    return json.loads(meta.get("meta", "{}"))


def predictor_key(predictor_path: Path) -> dict[str, object]:
    """What identifies a trained predictor: its file's hash plus the training metadata it carries."""
    meta = predictor_meta(predictor_path)
    key = {k: meta.get(k) for k in ("zoo_fingerprint", "seed", "sessions", "validation_sessions", "turns",
                                     "max_new_tokens")}
    if "models" in meta:  # memspec_build's name for the models' fingerprint (the zoo's is zoo_fingerprint)
        key["models"] = meta["models"]
    key["predictor_sha1"] = hashlib.sha1(Path(predictor_path).read_bytes()).hexdigest()
    return key


def _from_trace_cache(meta: dict[str, object], cache: Path) -> set[str] | None:
    fp, seed = meta.get("zoo_fingerprint"), meta.get("seed")
    n = int(meta.get("sessions", 0) or 0) + int(meta.get("validation_sessions", 0) or 0)
    files = sorted(cache.glob(f"train-{fp}-{seed}-*.npz")) if fp is not None and cache.is_dir() else []
    if not files or len(files) < n:
        return None
    prompts: set[str] = set()
    for path in files[:n] if n else files:
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(bytes(z["header"]).decode())
        prompts.update(t["prompt"] for t in header["turns"])
    return prompts


def _from_committed(key: dict[str, object], path: Path) -> set[str] | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if data.get("predictor") != key:
        return None
    return set(data["sha1"])


def training_reports(predictor_path: Path) -> list[Path]:
    """Where a predictor's training report may lie: memspec_build's, then the zoo's."""
    predictor_path = Path(predictor_path)
    return [predictor_path.parent / "reports" / "predictor.json", predictor_path.with_suffix(".json")]


def _from_training_report(key: dict[str, object], predictor_path: Path) -> tuple[set[str], Path] | None:
    """The ``train_prompt_sha1`` of the first report that belongs to this predictor file."""
    size = Path(predictor_path).stat().st_size
    for path in training_reports(predictor_path):
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(report, dict) or not isinstance(report.get("train_prompt_sha1"), list):
            continue
        if report.get("file_bytes") != size:
            continue  # written for another predictor file
        if "predictor_sha1" in report and report["predictor_sha1"] != key["predictor_sha1"]:
            continue
        return set(report["train_prompt_sha1"]), path
    return None


def load_training_prompts(predictor_path: Path, *, cache: Path = TRACE_CACHE,
                          committed: Path = COMMITTED) -> TrainingPrompts:
    """Recover the predictor's training prompts (see the module docstring for the order)."""
    meta = predictor_meta(predictor_path)
    key = predictor_key(predictor_path)
    found = _from_trace_cache(meta, cache)
    if found is not None:
        return TrainingPrompts(frozenset(map(prompt_hash, found)), f"predictor training traces in {cache}", key)
    hashes = _from_committed(key, committed)
    if hashes is not None:
        return TrainingPrompts(frozenset(hashes), f"committed list {committed.name}", key)
    reported = _from_training_report(key, predictor_path)
    if reported is not None:
        return TrainingPrompts(frozenset(reported[0]), f"predictor training report {reported[1]}", key)
    return TrainingPrompts(frozenset(), "unavailable (document-level split only)", key)


def main() -> int:
    """``python -m bench.split [--write]``: show (and optionally commit) the training-prompt list."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--predictor", type=Path, default=REPO / "models" / "zoo" / "predictor.safetensors")
    ap.add_argument("--write", action="store_true", help=f"write {COMMITTED.name} from the caches")
    args = ap.parse_args()
    tp = load_training_prompts(args.predictor, committed=Path("/nonexistent"))
    print(f"{len(tp.hashes)} training prompts from {tp.source}")
    if args.write:
        if not tp.hashes:
            print("no cache to build the list from", file=sys.stderr)
            return 1
        source = tp.source.replace(str(REPO) + "/", "")
        COMMITTED.write_text(json.dumps({"predictor": tp.predictor_key, "source": source,
                                         "sha1": sorted(tp.hashes)}, indent=0) + "\n")
        print(f"wrote {COMMITTED}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
