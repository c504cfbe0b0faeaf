"""Resumable steps: a finished step is not redone while its inputs are unchanged.

Training drafts takes long and machines get interrupted, so every step (split, sizing, each
training phase of each draft, predictor, evaluation) writes a stamp when it finishes:
``work/steps/<step>.json`` with a hash of everything it depended on (input file digests,
settings, budgets, the stamps of the steps before it) and a small JSON result. A rerun with
the same inputs finds the stamp, checks the step's outputs still exist and skips it; change
a corpus, a budget or the target and the hash changes, so that step and every step keyed on
it run again. Stamps are written last and atomically: a step killed half-way has none.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def input_key(inputs: Mapping[str, Any]) -> str:
    """A hash of a step's inputs (canonical JSON, so key order does not matter)."""
    text = json.dumps(inputs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class StepOutcome:
    """What a step produced, and whether this run did the work or found it done."""

    key: str
    result: dict[str, Any]
    skipped: bool


class StepLedger:
    """The stamps of one output folder."""

    def __init__(self, folder: Path, *, force: bool = False, redo: Collection[str] = ()) -> None:
        self.folder = folder
        self.force = force
        """Redo every step regardless of stamps (``--force``)."""
        self.redo = frozenset(redo)
        """Steps to redo even if they finished (``--resize``: the sizing); what depends on their
        results reruns when those results change."""

    def _stamp(self, name: str) -> Path:
        return self.folder / f"{name}.json"

    def finished(self, name: str, key: str, outputs: Sequence[Path] = ()) -> dict[str, Any] | None:
        """The stored result if ``name`` finished with inputs ``key`` and its outputs exist."""
        if self.force or name in self.redo:
            return None
        try:
            stamp = json.loads(self._stamp(name).read_text())
        except (OSError, ValueError):
            return None
        if stamp.get("key") != key or not all(p.exists() for p in outputs):
            return None
        return stamp.get("result", {})

    def record(self, name: str, key: str, result: Mapping[str, Any]) -> None:
        """Mark ``name`` finished with inputs ``key`` (atomic write)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self._stamp(name).with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": key, "result": dict(result)}, indent=1, default=str) + "\n")
        os.replace(tmp, self._stamp(name))

    def run(self, name: str, inputs: Mapping[str, Any], work: Callable[[], Mapping[str, Any]],
            outputs: Sequence[Path] = ()) -> StepOutcome:
        """Run ``work`` unless ``name`` already finished with these inputs; return its result."""
        key = input_key(inputs)
        done = self.finished(name, key, outputs)
        if done is not None:
            print(f"[{name}] finished before with the same inputs: skipped", flush=True)
            return StepOutcome(key, done, skipped=True)
        result = dict(work())
        self.record(name, key, result)
        return StepOutcome(key, result, skipped=False)
