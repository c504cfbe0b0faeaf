"""``python -m bench [--quick]``: run every experiment, write results.json, the plots and report.md.

    python -m bench --quick          # 2-4 minutes on 2 idle cores (make bench-quick)
    python -m bench                  # the full run, 13-24 minutes on 2 idle cores (make bench)
    python -m bench --catalogue ~/my_models   # your own model set (make bench CATALOGUE=~/my_models)

Order of work: load the catalogue's models (default: the bundled zoo); build the workload from
its evaluation prompts minus the predictor's training prompts; record (or reuse) the sessions'
exact traces; calibrate the emulated storage and the simulator's cost model on a separate
calibration session; experiment 1 (real runs of every configuration, interleaved) and its
simulation; experiment 2 from the same runs; the four simulated sweeps; then the results
document, figures and report. Progress goes to stderr; the last line on stdout is the
path of the results JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from .config import REPO, BenchConfig
from .progress import Progress


def parse_args(argv: list[str] | None = None) -> BenchConfig:
    """Command line -> configuration (the quick or full preset, with overrides)."""
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the short preset (make bench-quick)")
    ap.add_argument("--out", type=Path, help="results folder (default results/bench-<mode>-<timestamp>)")
    ap.add_argument("--catalogue", type=Path,
                    help="catalogue file (or its folder) to measure: target, drafts, predictor (default: the "
                         "default model set, models/smollm2: SmolLM2-135M-Instruct; the 17 M fixture: models/zoo)")
    ap.add_argument("--prompts", type=Path,
                    help="held-out evaluation prompts, {\"domain\", \"prompt\"} JSON lines (default: "
                         "<catalogue folder>/heldout/prompts.jsonl, which memspec_build writes)")
    ap.add_argument("--home-domain",
                    help="the domain every session opens with (default: robot if the prompts have it, else "
                         "the prompts file's first domain)")
    ap.add_argument("--sessions", type=int)
    ap.add_argument("--turns", type=int)
    ap.add_argument("--max-new-tokens", type=int)
    ap.add_argument("--budget", type=int, dest="budget_drafts", help="drafts that fit in memory (headline)")
    ap.add_argument("--ratio", type=float, dest="load_round_ratio", help="load time / round time (headline)")
    ap.add_argument("--k", type=int)
    ap.add_argument("--check-interval", type=int)
    ap.add_argument("--threads", type=int,
                    help="torch threads for the headline (default 0 = auto, the node's default: measured here)")
    ap.add_argument("--dtype", choices=("auto", "float32", "bfloat16"),
                    help="the models' compute dtype (default auto, the node's default: the faster measured here)")
    ap.add_argument("--cpu-neighbours", type=int, metavar="N",
                    help="run everything beside N CPU-bound processes (a robot computer's other nodes); default 0")
    ap.add_argument("--beside-threads", metavar="N,N|none",
                    help="thread counts whose experiment 1 is reported beside the headline (default: every other "
                         "count auto considers on this machine; the quick preset: none)")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--policies", help="comma-separated subset of the runtime's policies (default: all)")
    ap.add_argument("--carry-context", action="store_true", default=None,
                    help="one conversation per session instead of one per topic segment")
    args = vars(ap.parse_args(argv))
    quick = args.pop("quick")
    policies = args.pop("policies")
    beside = args.pop("beside_threads")
    overrides: dict[str, Any] = {k: v for k, v in args.items() if v is not None}
    if beside is not None:
        try:
            overrides["beside_threads"] = () if beside.strip().lower() == "none" else tuple(
                int(t) for t in beside.split(",") if t.strip())
        except ValueError:
            ap.error(f"--beside-threads takes thread counts like 1,2 or 'none', got {beside!r}")
    if policies:
        overrides["policies"] = tuple(p.strip() for p in policies.split(",") if p.strip())
    try:
        return BenchConfig.quick(**overrides) if quick else BenchConfig(**overrides)
    except ValueError as exc:  # a knob out of its bounds (memspec_ros.knobs): a usage error
        ap.error(str(exc))


def run(cfg: BenchConfig, progress: Progress) -> Path:
    """Run everything; returns the path of ``results.json``."""
    from memspec_ros.runtime import Budget
    from memspec_ros.runtime.speculation_choice import FALLBACK_K, choose_speculation
    from memspec_ros.runtime.thread_choice import choose_threads
    from memspec_ros.runtime.workload import load_chat_style, load_prompts

    from .calibration import calibrate
    from .experiments import Bench, ablation, oracle_granularity, run_headline, run_sweeps
    from .inputs import display_path, domain_mismatch
    from .plots import draw_all
    from .policy_factory import BENCH_POLICIES, PolicyFactory
    from .report import write_report
    from .results import assemble_results, shape_problems, write_results
    from .scaling import catalogue_scaling, dialogue_length_scaling
    from .split import load_training_prompts
    from .testbed import load_testbed
    from .thread_settings import beside_counts, run_at_threads, thread_settings
    from .trace_cache import session_traces
    from .workloads import build_workload

    created = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    out_dir = cfg.out or REPO / "results" / f"bench-{cfg.mode}-{time.strftime('%Y%m%d-%H%M%S')}"
    policies = list(cfg.policies or BENCH_POLICIES)
    unknown = [p for p in policies if p not in BENCH_POLICIES]
    if unknown:
        raise SystemExit(f"unknown policies {unknown}; choose from {', '.join(BENCH_POLICIES)}")
    progress.log(f"{cfg.mode} run -> {out_dir}; {cfg.command}")

    load = {"start": os.getloadavg()[0]}  # other work on the machine disturbs every timing
    testbed = load_testbed(cfg.catalogue, cfg.threads or None, cfg.dtype)
    progress.log(f"dtype: {testbed.dtype_note}")
    choice = None
    if cfg.threads == 0:  # the node's default: measure, as its configure does
        choice = choose_threads(testbed.engine, testbed.catalogue, Budget.drafts(cfg.budget_drafts),
                                testbed.materialize, cfg.k or FALLBACK_K)
        testbed.threads = choice.threads
        progress.log(f"threads: auto (the node's default) -> {choice.describe()}")
    command, speculation = cfg.command, None
    if not cfg.k or not cfg.check_interval:  # the node's default (0, auto): resolved as its configure does
        probe_factory = PolicyFactory(testbed.predictor_path, testbed.catalogue.names, seed=cfg.seed)
        speculation = choose_speculation(testbed.engine, testbed.catalogue, Budget.drafts(cfg.budget_drafts),
                                         testbed.materialize, lambda: probe_factory("memspec"),
                                         testbed.catalogue_file.parent, k=cfg.k, check_interval=cfg.check_interval)
        cfg = cfg.replace(k=speculation.k, check_interval=speculation.check_interval)
        progress.log(f"speculation: {speculation.describe()}")
    if not cfg.prompts_file.is_file():
        raise SystemExit(f"prompts file {cfg.prompts_file} does not exist: pass --prompts with held-out prompts "
                         "of the catalogue's domains")
    prompts = load_prompts(cfg.prompts_file)
    style = load_chat_style(cfg.prompts_file)
    mismatch = domain_mismatch(prompts, testbed.catalogue.domains)
    if mismatch:
        raise SystemExit(f"{display_path(cfg.prompts_file)}: {mismatch}")
    progress.log(f"catalogue {display_path(testbed.catalogue_file)}: {len(testbed.catalogue)} drafts "
                 f"({', '.join(testbed.catalogue.domains)}); prompts {display_path(cfg.prompts_file)}")
    training = load_training_prompts(testbed.predictor_path)
    try:
        workload = build_workload(prompts, exclude=training, sessions=cfg.sessions, turns=cfg.turns,
                                  max_new_tokens=cfg.max_new_tokens, shift_rates=cfg.shift_rates,
                                  calibration_turns=cfg.calibration_turns, seed=cfg.seed,
                                  carry_context=cfg.carry_context, home=cfg.home_domain, style=style)
    except ValueError as exc:  # too few prompts for these sizes, an unknown home domain: the user's to fix
        raise SystemExit(f"cannot build the workload from {display_path(cfg.prompts_file)}: {exc}") from None
    progress.log(f"workload: {len(workload.sessions)} sessions, {workload.excluded_prompts} prompt(s) excluded "
                 f"as predictor-training text ({training.source})")
    with progress.phase("traces (exact greedy runs)", len(workload.sessions)) as step:
        traces = session_traces(testbed, workload.sessions, cfg.cache, cfg.k,
                                on_done=lambda s, cached: step(f"{s.name}{' (cached)' if cached else ''}"))
    factory = PolicyFactory(testbed.predictor_path, testbed.catalogue.names, seed=cfg.seed)
    with progress.phase("calibration (cost model, bandwidth, overheads)", 1) as step:
        calibration = calibrate(testbed, workload.calibration, traces[0], ratio=cfg.load_round_ratio,
                                budget=Budget.drafts(cfg.budget_drafts), k=cfg.k, check_interval=cfg.check_interval,
                                repeats=cfg.cost_repeats, factory=factory)
        step("done")
    progress.log(f"round {calibration.round_s * 1e3:.1f} ms; emulated storage "
                 f"{calibration.storage.bandwidth_bytes_per_s / 1e6:.2f} MB/s -> mean load "
                 f"{calibration.mean_load_s * 1e3:.1f} ms, load/round {calibration.modelled_ratio:.2f}")
    bench = Bench(cfg=cfg, testbed=testbed, workload=workload, traces=traces, calibration=calibration,
                  factory=factory, policies=policies, progress=progress)

    headline = run_headline(bench)
    beside = {t: run_at_threads(bench, t) for t in beside_counts(cfg.beside_threads, testbed.threads)}
    load["after_real_runs"] = os.getloadavg()[0]
    experiments = {"ablation": ablation(bench, headline), **run_sweeps(bench),
                   "oracle_granularity": oracle_granularity(bench)}
    with progress.phase("7 scaling (simulated; scheduling costs measured)", 2) as step:
        experiments["scaling"] = {"catalogue_size": catalogue_scaling(bench, cfg.catalogue_sizes)}
        step("catalogue size")
        experiments["scaling"]["dialogue_length"] = dialogue_length_scaling(bench, max(cfg.catalogue_sizes))
        step("dialogue length")
    results = assemble_results(bench, headline, experiments, training, created, load_average=load)
    results["thread_settings"] = thread_settings(bench, headline, choice, beside)
    results["config"]["commands"]["python"] = command  # as requested: auto stays auto
    if speculation is not None:
        results["config"]["speculation_chosen_by"] = speculation.describe()
    targets = results["targets"]
    problems = shape_problems(results, require_all_configs=not cfg.policies)
    if problems:
        progress.log("results shape problems: " + "; ".join(problems))
    path = write_results(results, out_dir)
    draw_all(results, out_dir)
    write_report(results, out_dir)
    for t in targets:
        verdict = ("met" if t["holds"] else "below") if t["scope"] == "reference" else \
            ("holds" if t["holds"] else "MISSED")
        progress.log(f"{'reference ' if t['scope'] == 'reference' else ''}target vs {t['target']}: "
                     f"{t['ratio'] or 0:.2f}x (required {t['required']:.2f}x) {verdict}")
    progress.log(f"measured {display_path(testbed.catalogue_file)}; report: {out_dir / 'report.md'}")
    return path


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cfg = parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    from .cpu_neighbours import cpu_neighbours

    with cpu_neighbours(cfg.cpu_neighbours):
        path = run(cfg, Progress())
    sys.stdout.flush()
    print(path)
    return 0
