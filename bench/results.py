"""The results file: one JSON document with a stable, documented shape (``docs/bench.md``).

Top level::

    {"schema": "memspec-bench/1",
     "config": {...},                    # everything needed to interpret and reproduce the numbers,
                                         # "catalogue": which model set and prompts were measured
     "policies": {"<name>": {...}},      # experiment 1, real runs: every runtime policy,
                                         # "target-only", "hf-assisted", "hf-assisted-heuristic"
     "simulator_validation": {"<name>": {"real_tokens_per_s", "sim_tokens_per_s", "error", ...}},
     "targets": [{"target", "reference", "required", "ratio", "holds", "shortfall", "why"}],
     "experiments": {"ablation", "check_interval", "generation_length", "budget", "load_round_ratio",
                     "oracle_granularity", "scaling"},
     "timelines": {"<policy>": {...}},   # residency timeline of one session
     "calibration": {...}, "runtime_s": {...}}

Plots and the markdown report are drawn from this document alone, so they can be redrawn
from a results file without rerunning anything.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memspec_ros.runtime import Budget

from .config import REPO
from .hf_assisted import reencoding
from .inputs import display_path
from .policy_factory import BENCH_POLICIES
from .targets import RunFacts, check_targets

if TYPE_CHECKING:
    from .experiments import Bench, Headline
    from .split import TrainingPrompts

SCHEMA = "memspec-bench/1"
PEERS = ("target-only", "hf-assisted", "hf-assisted-heuristic", "hf-prompt-lookup")
"""Peers every run measures (llama.cpp's two configurations run only where it is installed)."""
REQUIRED_CONFIGS: tuple[str, ...] = (*BENCH_POLICIES, *PEERS)
"""Every configuration the ``policies`` section must list."""
POLICY_FIELDS = ("tokens_per_s", "acceptance_rate", "stall_s", "mean_accepted_length", "switches", "loads",
                 "peak_memory_bytes")
"""Fields every ``policies`` entry carries (more may follow; these never go away)."""
VALIDATION_FIELDS = ("real_tokens_per_s", "sim_tokens_per_s")
TOP_LEVEL = ("schema", "config", "policies", "simulator_validation", "targets", "experiments", "timelines")
CONFIG_FIELDS = ("catalogue", "models", "k", "budget_drafts", "check_interval", "emulated_bandwidth_bytes_per_s",
                 "requested_load_round_ratio", "measured_load_round_ratio", "threads", "commands")
SWEEPS = ("check_interval", "generation_length", "budget", "load_round_ratio")


def shape_problems(results: Mapping[str, object], *, require_all_configs: bool = True) -> list[str]:
    """What is missing from ``results`` relative to the documented shape (empty: conforms)."""
    problems = [f"missing top-level key {k!r}" for k in TOP_LEVEL if k not in results]
    config = results.get("config", {})
    assert isinstance(config, Mapping)
    problems += [f"config lacks {k!r}" for k in CONFIG_FIELDS if k not in config]
    policies = results.get("policies", {})
    assert isinstance(policies, Mapping)
    wanted = REQUIRED_CONFIGS if require_all_configs else tuple(policies)
    for name in wanted:
        entry = policies.get(name)
        if entry is None:
            problems.append(f"policies lacks {name!r}")
            continue
        problems += [f"policies[{name!r}] lacks {f!r}" for f in POLICY_FIELDS if f not in entry]
    validation = results.get("simulator_validation", {})
    assert isinstance(validation, Mapping)
    for name in (BENCH_POLICIES if require_all_configs else tuple(validation)):
        entry = validation.get(name)
        if entry is None:
            problems.append(f"simulator_validation lacks {name!r}")
        else:
            problems += [f"simulator_validation[{name!r}] lacks {f!r}" for f in VALIDATION_FIELDS if f not in entry]
    experiments = results.get("experiments", {})
    assert isinstance(experiments, Mapping)
    for sweep in SWEEPS:
        entry = experiments.get(sweep)
        if not isinstance(entry, Mapping) or "values" not in entry or "policies" not in entry:
            problems.append(f"experiments lacks sweep {sweep!r} with 'values' and 'policies'")
    return problems


def environment() -> dict[str, object]:
    """The software and machine the numbers were measured on."""
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "platform": platform.platform()}


def catalogue_entry(bench: Bench) -> dict[str, object]:
    """Which model set and which prompts this run measured (``config.catalogue``)."""
    cfg = bench.cfg
    return {"path": display_path(bench.testbed.catalogue_file), "bundled": cfg.bundled, "model_set": cfg.bundled_set,
            "prompts": display_path(cfg.prompts_file), "home_domain": bench.workload.home_domain,
            "domains": {s.name: s.domain for s in bench.testbed.catalogue}}


def _all_resident_draftless(experiments: Mapping[str, Any]) -> float | None:
    """memspec's share of draftless rounds at the 'all resident' point of the budget sweep, if run."""
    sweep = experiments.get("budget") or {}
    line = (sweep.get("policies") or {}).get("memspec")
    values = list(sweep.get("values") or [])
    if not line or "all" not in values:
        return None
    return line["draftless_round_fraction"][values.index("all")]


def assemble_results(bench: Bench, headline: Headline, experiments: Mapping[str, Any], training: TrainingPrompts,
                     created: str, load_average: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The results document of a run (see the module docstring for its shape).

    ``load_average``: the machine's 1-minute load average at points of the run (the report warns
    when other work was competing for the cores).
    """
    from .experiments import simulator_validation

    cfg, cal, catalogue = bench.cfg, bench.calibration, bench.testbed.catalogue
    reenc = [reencoding(tr, cal.cost) for tr in bench.traces]
    best = headline.best_adaptive()
    targets = check_targets(headline.summaries, best,
                            RunFacts(hf_draft=headline.hf_draft, reencoded_tokens=sum(t for t, _ in reenc),
                                     reencode_s=sum(s for _, s in reenc),
                                     memspec_draftless_all_resident=_all_resident_draftless(experiments)),
                            model_set=cfg.bundled_set)
    run_ratios = [s.load_round_ratio for n, s in headline.summaries.items()
                  if n in bench.policies and s.load_round_ratio is not None]
    config: dict[str, object] = {
        "mode": cfg.mode, "created": created,
        "commands": {"make": cfg.make_command, "python": cfg.command},
        "catalogue": catalogue_entry(bench),
        "models": {"target": {"path": display_path(bench.testbed.target_path),
                              "bytes": bench.testbed.target_nbytes()},
                   "drafts": {s.name: {"domain": s.domain, "bytes": s.size_bytes} for s in catalogue}},
        "k": cfg.k, "budget_drafts": cfg.budget_drafts,
        "budget_bytes": Budget.drafts(cfg.budget_drafts).capacity_bytes(catalogue),
        "check_interval": cfg.check_interval, "threads": bench.testbed.threads,
        "threads_chosen_by": "auto (the node's default num_threads: 0, measured in this run)" if cfg.threads == 0
        else "--threads",
        "emulated_bandwidth_bytes_per_s": cal.storage.bandwidth_bytes_per_s,
        "requested_load_round_ratio": cfg.load_round_ratio,
        "measured_load_round_ratio": cal.modelled_ratio,
        "runs_load_round_ratio": sum(run_ratios) / len(run_ratios) if run_ratios else None,
        "round_s": cal.round_s, "mean_load_s": cal.mean_load_s,
        "hf_assisted": {"draft": headline.hf_draft, "num_assistant_tokens": cfg.k, "schedule": "constant",
                        "heuristic_variant": "hf-assisted-heuristic: schedule 'heuristic' from k (+2/-1 per round)",
                        "chosen_by": "highest modelled tokens/s over the sessions' exact traces (hindsight)"},
        "hf_prompt_lookup": {"prompt_lookup_num_tokens": cfg.k},
        "llama_cpp": headline.llama_cpp,
        "dtype": bench.testbed.dtype_name, "dtype_chosen_by": bench.testbed.dtype_note,
        "policies_run": list(bench.policies), "best_adaptive_baseline": best,
        "workload": bench.workload.describe(),
        "split": {"method": "corpora split by document (95/5, fixed seed), then held-out prompts whose exact text "
                            "is a predictor-training prompt are dropped",
                  "source": training.source.replace(str(REPO) + "/", ""), "training_prompts": len(training.hashes),
                  "excluded_prompts": bench.workload.excluded_prompts, "predictor": training.predictor_key},
        "environment": {**environment(), "load_average_1min": dict(load_average or {})}, "bench": cfg.as_dict(),
    }
    return {
        "schema": SCHEMA, "config": config,
        "policies": {n: s.as_dict() for n, s in headline.summaries.items()},
        "simulator_validation": simulator_validation(headline),
        "targets": [t.as_dict() for t in targets],
        "experiments": dict(experiments),
        "timelines": headline.timelines,
        "calibration": cal.as_dict(),
        "runtime_s": {**bench.progress.phase_seconds, "total": time.perf_counter() - bench.progress.t0},
    }


def write_results(results: Mapping[str, object], out_dir: Path) -> Path:
    """Write ``results.json`` under ``out_dir``; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.json"
    path.write_text(json.dumps(results, indent=1, default=_jsonable) + "\n")
    return path


def load_results(path: Path) -> dict[str, object]:
    """Read a results file."""
    return json.loads(Path(path).read_text())


def _jsonable(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()  # type: ignore[union-attr]
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
