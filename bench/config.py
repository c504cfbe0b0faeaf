"""What one benchmark run is configured with: the quick and full presets and their knobs.

Everything that shapes a number in the report lives here, so that the report can print it
beside the results and anyone can rerun exactly the same thing (``BenchConfig.command``).
The quick preset is the same experiments on less data (fewer, shorter sessions, fewer sweep
points), sized to finish within 3 minutes on 2 cores; the full preset within about 20 (its experiment 1
runs once more for every other thread count auto considers, so more cores take longer).
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from memspec_ros import knobs

from .inputs import BUNDLED_CATALOGUE, REPO, bundled_set, default_prompts, display_path, is_bundled

__all__ = ["REPO", "BenchConfig"]


@dataclass(frozen=True)
class BenchConfig:
    """Knobs of a run (defaults are the full preset)."""

    mode: str = "full"
    catalogue: Path = BUNDLED_CATALOGUE
    """The model set to measure: a catalogue file or its folder (``--catalogue``; docs/catalogue.md)."""
    prompts: Path | None = None
    """Evaluation prompts (``--prompts``); ``None``: :func:`bench.inputs.default_prompts` of the catalogue."""
    home_domain: str | None = None
    """The domain every session opens with (``--home-domain``); ``None``: see :mod:`bench.workloads`."""
    out: Path | None = None
    """Results folder; ``None``: ``results/bench-<mode>-<timestamp>``."""
    cache: Path = REPO / "results" / "cache"
    """Where exact traces are kept between runs (keyed by the models' weights and the workload)."""

    # workload
    sessions: int = 6
    turns: int = 8
    max_new_tokens: int = 64
    shift_rates: tuple[int, ...] = (1, 2, 3)
    """Turns per topic segment; sessions cycle through these (different shift rates)."""
    calibration_turns: int = 3
    carry_context: bool = False
    """Keep one conversation for a whole session instead of one per topic segment (see workloads)."""
    seed: int = 7

    # the headline operating point
    budget_drafts: int = 2
    load_round_ratio: float = 2.7
    k: int = 0
    """The most draft tokens a round proposes; 0 = auto, the node's default (``num_speculative_tokens: 0``):
    :func:`memspec_ros.runtime.speculation_choice.choose_speculation` resolves it at the start of the run."""
    check_interval: int = 0
    """Rounds between scheduling decisions; 0 = auto, the node's default, resolved the same way."""
    threads: int = 0
    """torch intra-op threads for decoding; 0 = auto, the node's default (``num_threads: 0``): the
    count :func:`memspec_ros.runtime.thread_choice.choose_threads` picks on this machine."""
    dtype: str = "auto"
    """The models' compute dtype; ``auto``, the node's default: the faster of float32 and bfloat16 on
    this machine (:func:`memspec_ros.core.dtype_choice.choose_dtype`). Output is lossless relative to it."""
    cpu_neighbours: int = 0
    """CPU-bound processes running beside the whole run (``--cpu-neighbours``: a robot computer's other
    nodes); 0: none."""
    beside_threads: tuple[int, ...] | None = None
    """Thread counts whose experiment 1 (real runs and simulation) is reported beside the headline's;
    ``None``: every other count the node's auto setting would consider on this machine; empty: none."""
    cost_repeats: int = 15
    """Repeats of each micro-benchmark that feeds the simulator's cost model."""

    # sweeps (simulated)
    check_intervals: tuple[int, ...] = (1, 2, 4, 8, 16)
    budgets: tuple[int | None, ...] = (1, 2, 3, 4, None)
    """Drafts that fit in memory; ``None`` = every draft resident."""
    ratios: tuple[float, ...] = (0.5, 1.0, 2.0, 2.7, 4.0, 8.0)
    lengths: tuple[int, ...] = (1, 2, 4, 6, 8)
    """Generation length sweep: the first n turns of every session (more tokens, more shifts)."""
    catalogue_sizes: tuple[int, ...] = (6, 24, 96)
    """Scaling experiment: drafts in the catalogue (the catalogue's plus relabelled, perturbed copies)."""

    policies: tuple[str, ...] = field(default=())
    """Policies to run; empty = every policy of the runtime."""

    def __post_init__(self) -> None:
        """Refuse knobs the runtime would refuse, before minutes of traces are recorded."""
        knobs.K_SETTING.check(self.k)
        knobs.CHECK_INTERVAL_SETTING.check(self.check_interval)
        knobs.BUDGET_DRAFTS.check(self.budget_drafts)
        knobs.NUM_THREADS.check(self.threads)
        if self.cpu_neighbours < 0:
            raise ValueError(f"cpu_neighbours must be 0 or more, got {self.cpu_neighbours}")
        for threads in self.beside_threads or ():
            knobs.NUM_THREADS.check(threads)
            if threads == 0:
                raise ValueError("beside_threads are thread counts (>= 1); 0 (auto) is the headline's")
        for interval in self.check_intervals:
            knobs.CHECK_INTERVAL.check(interval)
        for budget in self.budgets:
            if budget is not None:
                knobs.BUDGET_DRAFTS.check(budget)

    @classmethod
    def quick(cls, **overrides: object) -> BenchConfig:
        """The ``--quick`` preset: the same experiments on less data."""
        base = {"mode": "quick", "sessions": 3, "turns": 4, "max_new_tokens": 48, "cost_repeats": 7,
                "check_intervals": (1, 2, 4, 8, 16), "budgets": (1, 2, 3, 4, None),
                "ratios": (0.5, 1.0, 2.7, 4.0, 8.0), "lengths": (1, 2, 3, 4), "catalogue_sizes": (6, 24),
                "beside_threads": ()}
        base.update(overrides)
        return cls(**base)  # type: ignore[arg-type]

    @property
    def prompts_file(self) -> Path:
        """The prompts file this run evaluates on (explicit, or the catalogue's default)."""
        return self.prompts if self.prompts is not None else default_prompts(self.catalogue)

    @property
    def bundled(self) -> bool:
        """Whether the run measures the default model set (no --catalogue needed to reproduce it)."""
        return is_bundled(self.catalogue)

    @property
    def bundled_set(self) -> str | None:
        """The bundled model set measured (its own targets apply), or None for a user's catalogue."""
        return bundled_set(self.catalogue)

    def replace(self, **changes: object) -> BenchConfig:
        """A copy with some knobs changed."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def command(self) -> str:
        """The command line that reproduces this configuration."""
        parts = ["python -m bench"]
        defaults = BenchConfig.quick() if self.mode == "quick" else BenchConfig()
        if self.mode == "quick":
            parts.append("--quick")
        for name, flag in (("sessions", "--sessions"), ("turns", "--turns"), ("max_new_tokens", "--max-new-tokens"),
                           ("budget_drafts", "--budget"), ("load_round_ratio", "--ratio"), ("k", "--k"),
                           ("check_interval", "--check-interval"), ("threads", "--threads"), ("seed", "--seed"),
                           ("dtype", "--dtype"), ("cpu_neighbours", "--cpu-neighbours")):
            if getattr(self, name) != getattr(defaults, name):
                parts.append(f"{flag} {getattr(self, name)}")
        if self.beside_threads != defaults.beside_threads:
            parts.append("--beside-threads " + (",".join(map(str, self.beside_threads or ())) or "none"))
        if self.policies:
            parts.append("--policies " + ",".join(self.policies))
        if self.carry_context:
            parts.append("--carry-context")
        return " ".join([*parts, *self._model_flags()])

    def _model_flags(self) -> list[str]:
        """``--catalogue``, ``--prompts`` and ``--home-domain`` where they differ from the defaults."""
        flags = [] if self.bundled else [f"--catalogue {shlex.quote(display_path(self.catalogue))}"]
        if self.prompts is not None and self.prompts.resolve() != default_prompts(self.catalogue).resolve():
            flags.append(f"--prompts {shlex.quote(display_path(self.prompts))}")
        if self.home_domain:
            flags.append(f"--home-domain {shlex.quote(self.home_domain)}")
        return flags

    @property
    def make_command(self) -> str:
        """The ``make`` line of this preset and model set (other knobs: :attr:`command`)."""
        target = "make bench-quick" if self.mode == "quick" else "make bench"
        return target if self.bundled else f"{target} CATALOGUE={shlex.quote(display_path(self.catalogue))}"

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly view (paths relative to the repository when inside it)."""
        out: dict[str, object] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "prompts":
                v = self.prompts_file
            if isinstance(v, Path):
                v = display_path(v)
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out
