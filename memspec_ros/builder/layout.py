"""Where everything lives in a ``memspec_build`` output folder.

One place for the paths so the three subcommands agree on them::

    <out>/catalogue.yaml          the file the node's `catalogue` parameter names
    <out>/target/                 the target: hard links to the user's files (a copy across filesystems)
    <out>/draft-<domain>/         one distilled draft per domain, and draft-general
    <out>/predictor.safetensors   the draft-need predictor (`memspec_build predictor`)
    <out>/heldout/<domain>.jsonl  held-out documents (5%, by document) no model was trained on
    <out>/heldout/prompts.jsonl   evaluation prompts cut from them ({"domain", "prompt"} rows)
    <out>/reports/                sizing, drafts (recipe and training), predictor and evaluation reports
    <out>/work/                   training and validation splits, token arrays, the target's validation
                                  continuations, checkpoints, traces, step stamps

The target sits *inside* the folder because a catalogue's paths must stay inside its folder
(the node refuses paths that escape it); hard links cost no disk space and, unlike symlinks,
do not resolve outside the folder. ``work/`` is what makes reruns skip finished steps; it may
be deleted once the build is done (a rerun then starts over).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memspec_ros.core.token_map import TOKEN_MAP_FILE

GENERAL = "general"
"""The domain of the draft trained on all corpora (the static policy's default draft)."""


def draft_name(domain: str) -> str:
    """The catalogue name (and folder) of a domain's draft."""
    return f"draft-{domain}"


@dataclass(frozen=True)
class OutputLayout:
    """Paths inside one output folder."""

    root: Path

    @property
    def catalogue(self) -> Path:
        return self.root / "catalogue.yaml"

    @property
    def target(self) -> Path:
        return self.root / "target"

    def draft(self, domain: str) -> Path:
        return self.root / draft_name(domain)

    @property
    def predictor(self) -> Path:
        return self.root / "predictor.safetensors"

    @property
    def heldout_dir(self) -> Path:
        return self.root / "heldout"

    def heldout(self, domain: str) -> Path:
        return self.heldout_dir / f"{domain}.jsonl"

    @property
    def heldout_prompts(self) -> Path:
        return self.heldout_dir / "prompts.jsonl"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def token_map(self) -> Path:
        """The drafts' token map (``--draft-vocab``), copied into every draft folder at export."""
        return self.work / "draft_vocab" / TOKEN_MAP_FILE

    def train_split(self, domain: str) -> Path:
        return self.work / "corpora" / f"{domain}.train.jsonl"

    def validation_split(self, domain: str) -> Path:
        """Training documents the drafts do not train on (:func:`.corpora.split_validation`)."""
        return self.work / "corpora" / f"{domain}.validation.jsonl"

    def validation_rows(self, domain: str) -> Path:
        """The target's greedy continuations of validation prefixes (:mod:`.validation`)."""
        return self.work / "validation" / f"{domain}.npy"

    @property
    def split_manifest(self) -> Path:
        """The domains, their sources and document counts (what `predictor` and `evaluate` read)."""
        return self.work / "corpora" / "manifest.json"

    def tokens(self, domain: str, split: str = "train") -> Path:
        return self.work / "tokens" / f"{domain}.{split}.npy"

    def checkpoint(self, domain: str, phase: str) -> Path:
        return self.work / "checkpoints" / draft_name(domain) / phase

    @property
    def stamps(self) -> Path:
        return self.work / "steps"

    @property
    def traces(self) -> Path:
        return self.work / "traces"
