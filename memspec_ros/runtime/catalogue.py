"""The draft catalogue and the memory budget the working set must respect.

A catalogue entry is everything the runtime needs to decide about a draft *without loading
it*: where its weights are, which domain it serves and how many bytes it will occupy when
resident. The size is what the loaded draft holds in the *compute dtype* (parameters, buffers,
the draft forward's rotary tables and its KV cache at full context;
:class:`~memspec_ros.core.model_footprint.ModelFootprint`), worked out from ``config.json`` and
the safetensors headers without reading weights, so that planning a working set never touches
them and the budget bounds real memory (a bf16 file computed in fp32 takes twice its size).
Sizing also checks the config against the weights: an absurd or tampered config is a
catalogue error naming the file and field, before anything is allocated from it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from memspec_ros.core.model_footprint import ModelFootprint
from memspec_ros.core.model_loading import inspect_footprint, weight_files
from memspec_ros.core.token_map import TOKEN_MAP_FILE, load_token_map
from memspec_ros.runtime.catalogue_file import CatalogueFile, load_catalogue_file


class CatalogueError(ValueError):
    """A catalogue entry is unusable (missing weights, unreadable header, duplicate name)."""


def draft_footprint(model_dir: Path, dtype: torch.dtype = torch.float32) -> ModelFootprint:
    """What a draft occupies loaded in ``dtype``, from its config and safetensors headers.

    Any failure (missing directory, pickle-only weights, a corrupt header, a config that is
    absurd or does not describe the weights, weights only ``from_pretrained`` can assemble) is a
    catalogue error that names the directory.
    """
    try:
        footprint = inspect_footprint(model_dir, dtype=dtype)
    except Exception as exc:  # ModelLoadError, ModelConfigError, SafetensorError, OSError...
        raise CatalogueError(f"cannot size draft weights in {model_dir}: {exc}") from exc
    if footprint.converted_tensors:
        raise CatalogueError(f"draft {model_dir}: {footprint.converted_tensors} of its module's tensors are built "
                             "by merging stored ones on load (fused experts), which the background draft "
                             "loader does not do; use a dense model as a draft (a target may be of any kind)")
    return footprint


@dataclass(frozen=True)
class DraftSpec:
    """One catalogued draft: identity, location, domain and sizes in bytes."""

    name: str
    path: Path
    domain: str
    size_bytes: int
    """Resident size in the compute dtype: what the budget and residency messages count."""
    stored_bytes: int = 0
    """Tensor bytes in its files: what a load reads from storage (0: unknown)."""
    dtype: torch.dtype = torch.float32
    """The compute dtype ``size_bytes`` was worked out for (the materializer must match)."""

    @property
    def weight_files(self) -> list[Path]:
        """The safetensors file(s) the loader reads (refuses pickle-only directories)."""
        return weight_files(self.path)

    @classmethod
    def from_dir(cls, name: str, path: Path | str, domain: str | None = None, *,
                 dtype: torch.dtype = torch.float32) -> DraftSpec:
        """Build an entry from a model directory, sized for compute in ``dtype``."""
        path = Path(path)
        footprint = draft_footprint(path, dtype)
        token_map = load_token_map(path)  # a subset draft's id tables stay resident with it
        map_bytes = token_map.nbytes if token_map is not None else 0
        return cls(name=name, path=path, domain=domain or name, size_bytes=footprint.resident_bytes + map_bytes,
                   stored_bytes=footprint.stored_bytes, dtype=dtype)


class Catalogue(Sequence[DraftSpec]):
    """An ordered, name-indexed collection of drafts (order = the order messages list them)."""

    def __init__(self, specs: Iterable[DraftSpec]) -> None:
        self._specs: tuple[DraftSpec, ...] = tuple(specs)
        self._by_name: dict[str, DraftSpec] = {}
        for spec in self._specs:
            if spec.name in self._by_name:
                raise CatalogueError(f"duplicate draft name {spec.name!r} in catalogue")
            if spec.size_bytes <= 0:
                raise CatalogueError(f"draft {spec.name!r} has no tensor bytes")
            self._by_name[spec.name] = spec

    def __getitem__(self, index):  # type: ignore[override]
        return self._specs[index]

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def get(self, name: str) -> DraftSpec:
        """Return the entry called ``name``; ``KeyError`` names the known drafts otherwise."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"unknown draft {name!r}; catalogue has {sorted(self._by_name)}") from None

    @property
    def names(self) -> list[str]:
        """Draft names in catalogue order."""
        return [s.name for s in self._specs]

    def by_domain(self, domain: str) -> DraftSpec | None:
        """The first draft specialised on ``domain`` (``None`` if the domain has none)."""
        for spec in self._specs:
            if spec.domain == domain:
                return spec
        return None

    @property
    def domains(self) -> list[str]:
        """Domains served, in catalogue order."""
        return [s.domain for s in self._specs]

    @classmethod
    def from_dirs(cls, entries: Mapping[str, Path | str], domains: Mapping[str, str] | None = None, *,
                  dtype: torch.dtype = torch.float32) -> Catalogue:
        """Build from ``{name: model_dir}``; domains default to the name without a ``draft-`` prefix."""
        domains = domains or {}
        return cls(
            DraftSpec.from_dir(name, path, domains.get(name) or name.removeprefix("draft-"), dtype=dtype)
            for name, path in entries.items()
        )

    @classmethod
    def from_file(cls, catalogue: CatalogueFile | Path | str, names: Iterable[str] | None = None, *,
                  dtype: torch.dtype = torch.float32) -> Catalogue:
        """The drafts of a catalogue file (:mod:`.catalogue_file`), optionally only ``names``."""
        if not isinstance(catalogue, CatalogueFile):
            catalogue = load_catalogue_file(catalogue)
        entries = list(catalogue.drafts)
        if names is not None:
            wanted = list(names)
            missing = [n for n in wanted if n not in catalogue.draft_names]
            if missing:
                raise CatalogueError(f"drafts {missing} not in {catalogue.source} (has {catalogue.draft_names})")
            entries = [catalogue.draft(n) for n in wanted]
        return cls(DraftSpec.from_dir(e.name, e.path, e.domain, dtype=dtype) for e in entries)


def zoo_fingerprint(paths: Iterable[Path]) -> str:
    """A short hash of model directories' weights (size + head + tail of every file).

    Cached traces and predictors are only valid for the exact weights they were made with;
    this is cheap enough to compute on every run.
    """
    import hashlib

    h = hashlib.sha1()
    for d in paths:
        token_map = Path(d) / TOKEN_MAP_FILE  # a subset draft's map decides its proposals too
        for f in [*weight_files(d), *([token_map] if token_map.is_file() else [])]:
            size = f.stat().st_size
            h.update(f"{f.name}:{size}".encode())
            with open(f, "rb") as fh:
                h.update(fh.read(1 << 16))
                fh.seek(max(0, size - (1 << 16)))
                h.update(fh.read())
    return h.hexdigest()[:12]


_SIZE_RE = re.compile(r"^\s*([0-9.]+)\s*([kmg]i?b?|b|bytes?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "byte": 1, "bytes": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6,
          "g": 10**9, "gb": 10**9, "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2,
          "gi": 1024**3, "gib": 1024**3}


@dataclass(frozen=True)
class Budget:
    """Memory available to drafts: a byte limit, a count of drafts, both, or neither (unlimited).

    A count budget ("two drafts") is how the paper states its regime; a byte budget is what a
    robot's memory actually imposes. Both are enforced when both are given.
    """

    max_bytes: int | None = None
    max_drafts: int | None = None

    def __post_init__(self) -> None:
        if self.max_bytes is not None and self.max_bytes < 0:
            raise ValueError("budget bytes must be >= 0")
        if self.max_drafts is not None and self.max_drafts < 0:
            raise ValueError("budget drafts must be >= 0")

    @classmethod
    def drafts(cls, n: int) -> Budget:
        """A budget of ``n`` drafts whatever their size."""
        return cls(max_drafts=n)

    @classmethod
    def bytes(cls, n: int) -> Budget:
        """A budget of ``n`` bytes."""
        return cls(max_bytes=n)

    @classmethod
    def unlimited(cls) -> Budget:
        """No limit (the oracle's setting: every draft resident)."""
        return cls()

    @classmethod
    def parse(cls, text: str | int) -> Budget:
        """Parse ``"2 drafts"``, ``"12MB"``, ``"3MiB"``, ``"unlimited"`` or a plain byte count."""
        if isinstance(text, int):
            return cls(max_bytes=text)
        t = text.strip().lower()
        if t in ("", "unlimited", "all", "inf"):
            return cls()
        m = re.match(r"^(\d+)\s*drafts?$", t)
        if m:
            return cls(max_drafts=int(m.group(1)))
        m = _SIZE_RE.match(t)
        if not m:
            raise ValueError(f"cannot parse budget {text!r} (try '2 drafts' or '12MB')")
        unit = (m.group(2) or "").lower()
        return cls(max_bytes=int(float(m.group(1)) * _UNITS[unit]))

    @property
    def is_unlimited(self) -> bool:
        """True when neither limit is set."""
        return self.max_bytes is None and self.max_drafts is None

    def admits(self, sizes: Iterable[int]) -> bool:
        """Whether drafts of these sizes may be in memory (resident or loading) together."""
        sizes = list(sizes)
        if self.max_drafts is not None and len(sizes) > self.max_drafts:
            return False
        return self.max_bytes is None or sum(sizes) <= self.max_bytes

    def capacity_bytes(self, catalogue: Catalogue) -> int:
        """The byte figure to report: ``max_bytes``, or for a count budget the N largest drafts."""
        sizes = sorted((s.size_bytes for s in catalogue), reverse=True)
        cap = sum(sizes) if self.max_drafts is None else sum(sizes[: self.max_drafts])
        return cap if self.max_bytes is None else min(cap, self.max_bytes)

    def describe(self) -> str:
        """Human-readable form for logs and reports."""
        parts = []
        if self.max_drafts is not None:
            parts.append(f"{self.max_drafts} drafts")
        if self.max_bytes is not None:
            parts.append(f"{self.max_bytes / 1e6:.2f} MB")
        return " and ".join(parts) or "unlimited"
