"""Experiment 1 at the thread counts the headline did not use, reported beside it.

The headline runs the node's default, ``num_threads: 0`` (auto), so its figures are what a
robot running the launch file gets. Whether auto chose well is only visible beside the
alternatives: every other thread count auto considers (1, 2, 4, ... up to the cores) gets the
same real runs of every configuration, on the same sessions, and the same simulation, with a
cost model calibrated at that count and the headline's emulated storage (the device's flash
does not speed up with the thread count; the load/round ratio then differs, and is reported).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any

import torch

from memspec_ros.core.thread_tuning import ThreadChoice, candidate_thread_counts

from .calibration import Calibration, calibrate
from .experiments import TARGET_ONLY, Bench, Headline, run_headline, simulator_validation

SIM_TOLERANCE = 0.06
"""The simulator must reproduce every real policy's tokens/s within 6% at every thread setting reported."""


def beside_counts(requested: Sequence[int] | None, headline_threads: int) -> list[int]:
    """The thread counts to report beside the headline's: ``requested``, or every other auto candidate."""
    counts = candidate_thread_counts() if requested is None else sorted(set(requested))
    return [t for t in counts if t != headline_threads]


def run_at_threads(bench: Bench, threads: int) -> tuple[Headline, Calibration]:
    """Calibrate at ``threads`` and run experiment 1 there; torch is set back to the headline's count after.

    Returns the headline and its calibration (with the drift the real runs measured)."""
    headline_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        cfg = bench.cfg
        with bench.progress.phase(f"calibration at {threads} thread(s)", 1) as step:
            calibration = calibrate(bench.testbed, bench.workload.calibration, bench.traces[0],
                                    ratio=cfg.load_round_ratio, budget=bench.budget, k=cfg.k,
                                    check_interval=cfg.check_interval, repeats=cfg.cost_repeats,
                                    factory=bench.factory, storage=bench.calibration.storage)
            step("done")
        at_threads = dataclasses.replace(bench, calibration=calibration)
        headline = run_headline(at_threads, label=f" at {threads} thread(s)")
        return headline, at_threads.calibration
    finally:
        torch.set_num_threads(headline_threads)


def setting_entry(threads: int, headline: Headline, calibration: Calibration) -> dict[str, Any]:
    """One thread setting's figures: tokens/s of every configuration, memspec's ratios, the simulator's errors."""
    tps = {n: s.tokens_per_s for n, s in headline.summaries.items()}
    memspec = tps.get("memspec")
    best = headline.best_adaptive()
    validation = simulator_validation(headline)
    errors = {n: v["error"] for n, v in validation.items() if v.get("error") is not None}
    worst = max(errors, key=lambda n: abs(errors[n])) if errors else None
    at_probe = {n: e for n, v in validation.items() if (e := v.get("error_at_probe_speed")) is not None}
    worst_probe = max(at_probe, key=lambda n: abs(at_probe[n])) if at_probe else None

    ratios = [s.load_round_ratio for s in headline.summaries.values() if s.load_round_ratio is not None]

    def ratio(ref: str | None) -> float | None:
        return memspec / tps[ref] if memspec and ref and tps.get(ref) else None

    return {"threads": threads, "tokens_per_s": tps, "round_ms": calibration.round_s * 1e3,
            "drift": calibration.drift.overall if calibration.drift else None,
            "memspec_vs": {"target-only": ratio(TARGET_ONLY), "oracle": ratio("oracle"),
                           "best_adaptive": ratio(best), "hf-assisted": ratio("hf-assisted")},
            "best_adaptive_baseline": best,
            "load_round_ratio": statistics.fmean(ratios) if ratios else None,
            "outputs_identical": all(s.outputs_identical is not False for s in headline.summaries.values()),
            "outputs_lossless": all(not s.output_mismatches and s.output_agreement is None
                                    for s in headline.summaries.values() if s.outputs_identical is not None),
            "simulator_validation": validation,
            "simulator_worst": {"policy": worst, "error": errors[worst] if worst else None,
                                "within_tolerance": all(abs(e) <= SIM_TOLERANCE for e in errors.values())},
            "simulator_worst_at_probe_speed": {"policy": worst_probe,
                                               "error": at_probe[worst_probe] if worst_probe else None}}


def thread_settings(bench: Bench, headline: Headline, choice: ThreadChoice | None,
                    beside: dict[int, tuple[Headline, Calibration]]) -> dict[str, Any]:
    """The ``thread_settings`` section of the results: how the headline's count was chosen, and every setting."""
    threads = bench.testbed.threads
    settings = [setting_entry(threads, headline, bench.calibration),
                *(setting_entry(t, h, c) for t, (h, c) in sorted(beside.items()))]
    return {"headline_threads": threads, "auto": choice is not None,
            "auto_round_ms": {str(t): s * 1e3 for t, s in choice.round_s.items()} if choice else None,
            "tolerance": SIM_TOLERANCE, "settings": settings, "fastest_measured": _fastest(settings)}


def _fastest(settings: list[dict[str, Any]]) -> int | None:
    """The thread count at which memspec was fastest (None when memspec was not run)."""
    measured = [s for s in settings if s["tokens_per_s"].get("memspec")]
    return max(measured, key=lambda s: s["tokens_per_s"]["memspec"])["threads"] if measured else None

