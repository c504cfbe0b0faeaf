"""The paper's six experiments, on one testbed, one workload and one calibration.

1. **Headline** - every policy, target-only decoding and transformers' assisted generation, for
   real, at the configured budget (2 drafts), check interval (4) and load/round ratio (2.7).
   Runs are interleaved - session by session, the configuration order rotating - so that a
   slow spell of a shared machine does not land on one configuration.
2. **Ablation** - memspec vs memspec-predict-only vs memspec-manage-only: the same real runs
   as (1) (same run, same sessions, side by side), also broken down by the sessions' shift rate.
3. **Check interval** sweep, 4. **generation length** sweep (the first n turns of every session:
   longer generations hold more topic shifts), 5. **memory budget** sweep (1-4 drafts and all
   resident), 6. **load/round ratio** sweep - on the simulator, which replays the exact traces
   through the same policy code; its error against the real runs of (1) is reported.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memspec_ros.runtime import ADAPTIVE_BASELINES, Budget, CostModel, RuntimeConfig
from memspec_ros.runtime.ngram_member import NgramSettings
from memspec_ros.runtime.policies.oracle import DEFAULT_SEGMENT_ROUNDS, OraclePolicy
from memspec_ros.runtime.turns import opening_ids

from . import llama_cpp_peer
from .calibration import Calibration
from .config import BenchConfig
from .drift import Drift, compute_drift, other_factor, verification_speed
from .hf_assisted import best_single_draft, run_hf_assisted, run_hf_prompt_lookup, warm_up_hf
from .measures import PolicySummary, RunMeasure, summarize
from .policy_factory import PolicyFactory
from .progress import Progress
from .real_runs import run_policy, run_target_only
from .sim_runs import model_target_only, simulate
from .speed_probe import target_step_s
from .testbed import Testbed
from .timeline import session_timeline
from .trace_cache import DialogueTraces
from .workloads import Workload

TARGET_ONLY = "target-only"
HF_ASSISTED = "hf-assisted"
HF_ASSISTED_HEURISTIC = "hf-assisted-heuristic"
HF_PROMPT_LOOKUP = "hf-prompt-lookup"
ABLATION = ("memspec", "memspec-predict-only", "memspec-manage-only")


@dataclass
class Bench:
    """Everything the experiments share."""

    cfg: BenchConfig
    testbed: Testbed
    workload: Workload
    traces: list[DialogueTraces]
    calibration: Calibration
    factory: PolicyFactory
    policies: list[str]
    progress: Progress

    @property
    def budget(self) -> Budget:
        """The headline memory budget."""
        return Budget.drafts(self.cfg.budget_drafts)

    def runtime_config(self, check_interval: int | None = None) -> RuntimeConfig:
        """The headline runtime configuration (emulated storage included)."""
        return RuntimeConfig(k=self.cfg.k, check_interval=check_interval or self.cfg.check_interval,
                             storage=self.calibration.storage, ngram=NgramSettings())


@dataclass
class Headline:
    """Experiment 1 (and 2): real per-session measures of every configuration, and their simulation."""

    real: dict[str, list[RunMeasure]]
    simulated: dict[str, list[RunMeasure]]
    timelines: dict[str, dict[str, object]]
    """Residency timelines of one session (the one with most topic shifts), per policy."""
    hf_draft: str
    llama_cpp: dict[str, object] = field(default_factory=dict)
    """Whether llama.cpp ran (``installed``, ``version``, ``gguf``) or why not (``note``)."""
    simulated_at_probe_speed: dict[str, list[RunMeasure]] = field(default_factory=dict)
    """The same simulation with each run at its session block's probe speed instead of its own
    verifications' (:mod:`bench.drift`): reported beside the validation, not used elsewhere."""
    summaries: dict[str, PolicySummary] = field(init=False)

    def __post_init__(self) -> None:
        self.summaries = {name: summarize(runs) for name, runs in self.real.items()}

    def best_adaptive(self) -> str | None:
        """The adaptive baseline with the highest real tokens/s."""
        names = [n for n in ADAPTIVE_BASELINES if n in self.summaries]
        return max(names, key=lambda n: self.summaries[n].tokens_per_s) if names else None


def _rotated(names: Sequence[str], i: int) -> list[str]:
    i %= max(1, len(names))
    return [*names[i:], *names[:i]]


def run_headline(bench: Bench, label: str = "") -> Headline:
    """Experiment 1: real runs of every configuration on every session, then their simulation.

    ``label`` names the setting in the progress lines (another thread count: :mod:`bench.thread_settings`).
    """
    cfg, tb = bench.cfg, bench.testbed
    sessions, traces = bench.workload.sessions, bench.traces
    hf_draft = best_single_draft(traces, tb.catalogue.names, bench.calibration.cost, cfg.k)
    llama, llama_info = _llama_cpp_peers(bench)
    configs = [*bench.policies, TARGET_ONLY, HF_ASSISTED, HF_ASSISTED_HEURISTIC, HF_PROMPT_LOOKUP, *llama]
    real: dict[str, list[RunMeasure]] = {c: [] for c in configs}
    eos = set(tb.engine.eos_token_ids)
    for peer in llama.values():
        peer.warm_up(traces[0].turns[0].prompt_ids, eos)
    timeline_session = max(range(len(sessions)), key=lambda i: (len(sessions[i].topic_shifts), -i))
    timelines: dict[str, dict[str, object]] = {}
    config = bench.runtime_config()
    runs: dict[str, list[list]] = {name: [] for name in bench.policies}
    """Per policy, its per-turn reports of every session (the drift is measured on their rounds)."""
    warm_up_hf(tb, traces[0], hf_draft, cfg.k)  # transformers' first generate() call initialises lazily
    probe_prompt = opening_ids(tb.engine, bench.workload.calibration.turns[0])  # calibrate()'s probe text
    reference = bench.calibration.probe_s
    speeds: list[float] = []
    """Per session block: the machine's speed (the median probe over the calibration's)."""
    with bench.progress.phase(f"1 headline{label} (real runs)", len(configs) * len(sessions)) as step:
        for i, (session, trace) in enumerate(zip(sessions, traces, strict=True)):
            probes = [target_step_s(tb.engine, probe_prompt)]
            for name in _rotated(configs, i):
                if name == TARGET_ONLY:
                    real[name].append(run_target_only(tb.engine, session, trace))
                elif name in (HF_ASSISTED, HF_ASSISTED_HEURISTIC):
                    schedule = "heuristic" if name == HF_ASSISTED_HEURISTIC else "constant"
                    real[name].append(run_hf_assisted(tb, trace, hf_draft, cfg.k, bench.calibration.cost, schedule))
                elif name == HF_PROMPT_LOOKUP:
                    real[name].append(run_hf_prompt_lookup(tb, trace, cfg.k))
                elif name in llama:
                    real[name].append(llama[name].run(trace, eos))
                else:
                    measure, reports = run_policy(tb, session, trace, bench.factory, name, bench.budget, config)
                    real[name].append(measure)
                    runs[name].append(reports)
                    if i == timeline_session:
                        timelines[name] = session_timeline(name, session, reports)
                probes.append(target_step_s(tb.engine, probe_prompt))
                step(f"{name} {session.name}")
            timed = [p for p in probes if p > 0]
            speeds.append(statistics.median(timed) / reference if reference > 0 and timed else 1.0)
    measured_cost = bench.calibration.cost
    # Each run's machine speed: its own verifications outside loads (bench/drift.py); the block's probes
    # are the fallback, and the yardstick of the comparison simulation reported beside it.
    own = {name: [verification_speed(measured_cost, reports) or speeds[i] for i, reports in enumerate(runs[name])]
           for name in bench.policies}
    modelled_steps = [model_target_only(tr, measured_cost).verify_s for tr in traces]
    own[TARGET_ONLY] = [m.verify_s / s if m.verify_s > 0 and s > 0 else speeds[i]
                        for i, (m, s) in enumerate(zip(real[TARGET_ONLY], modelled_steps, strict=True))]
    block = {name: speeds[: len(runs[name])] for name in bench.policies}
    drift = _drift_with_other(bench, runs, own, measured_cost)
    by_probe = _drift_with_other(bench, runs, block, measured_cost)
    run_speeds = [s for name in bench.policies for s in own[name]]
    if drift is not None:  # every simulation from here on: the runtime's measured cost at the runs' mean speed
        bench.calibration = dataclasses.replace(bench.calibration, drift=drift, measured=measured_cost,
                                                cost=drift.at_speed(statistics.fmean(run_speeds)).apply(measured_cost))
        bench.progress.log(f"drift: at the calibration's machine speed, the real rounds took {drift.overall:.3f}x "
                           f"the calibrated compute time (verification {drift.verify:.3f}x, drafts "
                           + ", ".join(f"{d} {x:.2f}x" for d, x in drift.drafts.items())
                           + f"; rounds during a load {drift.loading:.3f}x; outside rounds {drift.other:.3f}x); the "
                           f"runs' own verifications ran at {min(run_speeds):.2f}-{max(run_speeds):.2f}x the "
                           "calibration's, the probes between runs at " + ", ".join(f"{x:.2f}" for x in speeds)
                           + "x by session block")
    bench.calibration = dataclasses.replace(bench.calibration, block_speeds=tuple(speeds),
                                            run_speeds={n: tuple(v) for n, v in own.items()})
    simulated: dict[str, list[RunMeasure]] = {}
    at_probe: dict[str, list[RunMeasure]] = {}
    with bench.progress.phase(f"1 headline{label} (simulated)", len(bench.policies)) as step:
        for name in bench.policies:
            simulated[name] = _simulate_runs(bench, name, drift, own[name], measured_cost)
            at_probe[name] = _simulate_runs(bench, name, by_probe, block[name], measured_cost)
            step(name)
        # Target-only runs no runtime: it is charged the machine's speed alone, not the runtime's drift.
        simulated[TARGET_ONLY] = [model_target_only(tr, measured_cost.compute_scaled(f))
                                  for tr, f in zip(traces, own[TARGET_ONLY], strict=True)]
        at_probe[TARGET_ONLY] = [model_target_only(tr, measured_cost.compute_scaled(f))
                                 for tr, f in zip(traces, speeds, strict=True)]
    return Headline(real=real, simulated=simulated, timelines=timelines, hf_draft=hf_draft, llama_cpp=llama_info,
                    simulated_at_probe_speed=at_probe)


def _llama_cpp_peers(bench: Bench) -> tuple[dict[str, llama_cpp_peer.LlamaCppPeer], dict[str, object]]:
    """llama.cpp on the model set's original GGUF, plain and with prompt lookup, if it can run here."""
    from memspec_ros.builder.packaged_target import default_wheel_cache, packaged_gguf

    from .config import REPO

    if not llama_cpp_peer.installed():
        return {}, {"installed": False, "note": f"not installed ({llama_cpp_peer.INSTALL_HINT})"}
    root = bench.testbed.catalogue_file.parent
    gguf = packaged_gguf(root, [REPO / ".cache" / "wheels", default_wheel_cache()], REPO / ".cache" / "gguf")
    if gguf is None:
        return {}, {"installed": True, "version": llama_cpp_peer.version(),
                    "note": "not run: this model set has no GGUF target (target.source.yaml) or its wheel is not "
                            "cached (make setup caches it)"}
    threads = bench.testbed.threads
    peers = {p.name: p for p in (llama_cpp_peer.LlamaCppPeer(gguf, threads),
                                 llama_cpp_peer.LlamaCppPeer(gguf, threads, prompt_lookup_tokens=bench.cfg.k))}
    return peers, {"installed": True, "version": llama_cpp_peer.version(), "gguf": gguf.name, "threads": threads,
                   "prompt_lookup_tokens": bench.cfg.k}


def _cost_at(drift: Drift | None, speed: float, measured: CostModel) -> CostModel:
    return drift.at_speed(speed).apply(measured) if drift is not None else measured.compute_scaled(speed)


def _simulate_runs(bench: Bench, name: str, drift: Drift | None, speeds: Sequence[float], measured: CostModel,
                   keep_reports: list[list] | None = None) -> list[RunMeasure]:
    """Policy ``name`` simulated on every session, each at its run's ``speeds[i]`` with ``drift``."""
    out = []
    for tr, f in zip(bench.traces, speeds, strict=True):
        kept: list = []
        cost = _cost_at(drift, f, measured)
        out.append(simulate(bench.testbed.catalogue, bench.budget, bench.factory, name, tr, cost,
                            bench.runtime_config(), keep_reports=kept))
        if keep_reports is not None:
            keep_reports.append(kept)
    return out


def _drift_with_other(bench: Bench, runs: dict[str, list[list]], speeds: dict[str, list[float]],
                      measured: CostModel) -> Drift | None:
    """The drift of the policies' real ``runs`` at their ``speeds``, time outside rounds included: one
    simulation of every run gives what that time comes to without it (:func:`bench.drift.other_factor`)."""
    names = list(runs)
    drift = compute_drift(measured, [r for n in names for r in runs[n]], [s for n in names for s in speeds[n]])
    if drift is None:
        return None
    simulated: list[list] = []
    for n in names:
        _simulate_runs(bench, n, drift, speeds[n], measured, keep_reports=simulated)
    return dataclasses.replace(drift, other=other_factor([r for n in names for r in runs[n]], simulated))


def ablation(bench: Bench, headline: Headline) -> dict[str, object]:
    """Experiment 2: the ablation policies from the headline's real runs, overall and per shift rate."""
    names = [n for n in ABLATION if n in headline.real]
    rates = sorted({s.shift_every for s in bench.workload.sessions})
    by_rate: dict[str, dict[str, float]] = {}
    for rate in rates:
        idx = [i for i, s in enumerate(bench.workload.sessions) if s.shift_every == rate]
        by_rate[str(rate)] = {n: summarize([headline.real[n][i] for i in idx]).tokens_per_s
                              for n in [*names, TARGET_ONLY] if n in headline.real}
    return {"policies": {n: headline.summaries[n].as_dict() for n in names},
            "tokens_per_s_by_shift_rate": by_rate,
            "simulated_tokens_per_s": {n: summarize(headline.simulated[n]).tokens_per_s
                                       for n in names if n in headline.simulated}}


Setting = tuple[Budget, CostModel, RuntimeConfig, list[DialogueTraces]]
"""What a sweep point changes: budget, time model (load times), runtime config, traces."""
V = TypeVar("V")


def _sweep(bench: Bench, title: str, values: Sequence[V], setting: Callable[[V], Setting],
           x: Sequence[object] | None = None) -> dict[str, Any]:
    """Simulate every policy at every value; one line per policy (plus modelled target-only)."""
    lines: dict[str, dict[str, list[float | None]]] = {
        n: {"tokens_per_s": [], "acceptance_rate": [], "stall_s": [], "loads": [], "draftless_round_fraction": []}
        for n in bench.policies}
    target_only: list[float] = []
    tokens: list[float] = []
    with bench.progress.phase(title, len(values) * len(bench.policies)) as step:
        for v in values:
            budget, cost, config, traces = setting(v)
            for name in bench.policies:
                s = summarize([simulate(bench.testbed.catalogue, budget, bench.factory, name, tr, cost, config)
                               for tr in traces])
                line = lines[name]
                line["tokens_per_s"].append(s.tokens_per_s)
                line["acceptance_rate"].append(s.acceptance_rate)
                line["stall_s"].append(s.stall_s)
                line["loads"].append(s.loads)
                line["draftless_round_fraction"].append(s.target_only_round_fraction)
                step(f"{v} {name}")
            target_only.append(summarize([model_target_only(tr, bench.calibration.target_only_cost())
                                          for tr in traces]).tokens_per_s)
            tokens.append(statistics.fmean(tr.generated_tokens for tr in traces))
    return {"values": list(x if x is not None else values), "policies": lines, TARGET_ONLY: target_only,
            "tokens_per_session": tokens}


def sweep_check_interval(bench: Bench) -> dict[str, object]:
    """Experiment 3."""
    cost = bench.calibration.cost
    return _sweep(bench, "3 check interval (simulated)", bench.cfg.check_intervals,
                  lambda v: (bench.budget, cost, bench.runtime_config(v), bench.traces))


def sweep_length(bench: Bench) -> dict[str, Any]:
    """Experiment 4: the first n turns of every session."""
    cost = bench.calibration.cost
    lengths = [n for n in bench.cfg.lengths if n <= bench.cfg.turns]

    def setting(n: int) -> Setting:
        return bench.budget, cost, bench.runtime_config(), [tr.prefix(n) for tr in bench.traces]

    out = _sweep(bench, "4 generation length (simulated)", lengths, setting)
    out["turns"] = lengths
    out["labels"] = [f"{n} ({tok:.0f} tok)" for n, tok in zip(lengths, out["tokens_per_session"], strict=True)]
    out["topic_shifts_per_session"] = [statistics.fmean(len(s.prefix(n).topic_shifts) for s in bench.workload.sessions)
                                       for n in lengths]
    return out


def sweep_budget(bench: Bench) -> dict[str, object]:
    """Experiment 5: 1, 2, 3, 4 drafts and all resident."""
    cost = bench.calibration.cost

    def setting(v: int | None) -> Setting:
        return Budget.unlimited() if v is None else Budget.drafts(v), cost, bench.runtime_config(), bench.traces

    return _sweep(bench, "5 memory budget (simulated)", bench.cfg.budgets, setting,
                  x=["all" if v is None else v for v in bench.cfg.budgets])


def sweep_ratio(bench: Bench) -> dict[str, object]:
    """Experiment 6: load time / round time from fast to very slow storage."""
    cal = bench.calibration

    def setting(v: float) -> Setting:
        return bench.budget, cal.cost.with_loads(cal.loads_for_ratio(v)), bench.runtime_config(), bench.traces

    return _sweep(bench, "6 load/round ratio (simulated)", bench.cfg.ratios, setting)


def oracle_granularity(bench: Bench) -> dict[str, Any]:
    """How much the oracle's hindsight granularity matters (simulated, headline configuration).

    The ``oracle`` policy knows the best draft per segment (what a forecaster could at best get
    right); knowing it per round is a stricter bound that switches drafts mid-segment. Both are
    simulated on the same traces and the same time model as memspec's simulation beside them (not
    the headline's, which runs each session at its real run's speed), so the gaps are one time model's.
    """
    if "oracle" not in bench.policies:
        return {}
    cfg, cost = bench.runtime_config(), bench.calibration.cost
    out: dict[str, Any] = {"segment_rounds": [], "oracle_sim_tokens_per_s": []}
    for rounds in (1, DEFAULT_SEGMENT_ROUNDS, 16):
        def factory(_name: str, oracle: Any, rounds: int = rounds) -> OraclePolicy:
            return OraclePolicy(oracle, segment_rounds=rounds)

        runs = [simulate(bench.testbed.catalogue, Budget.unlimited(), factory, "oracle", tr, cost, cfg)
                for tr in bench.traces]
        out["segment_rounds"].append(rounds)
        out["oracle_sim_tokens_per_s"].append(summarize(runs).tokens_per_s)
    if "memspec" in bench.policies:  # on the same cost as the oracles (not the headline's per-run speeds)
        out["memspec_sim_tokens_per_s"] = summarize(
            [simulate(bench.testbed.catalogue, bench.budget, bench.factory, "memspec", tr, cost, cfg)
             for tr in bench.traces]).tokens_per_s
    return out


def run_sweeps(bench: Bench) -> dict[str, Any]:
    """Experiments 3-6, keyed as in the results document."""
    return {"check_interval": sweep_check_interval(bench), "generation_length": sweep_length(bench),
            "budget": sweep_budget(bench), "load_round_ratio": sweep_ratio(bench)}


def simulator_validation(headline: Headline) -> dict[str, dict[str, float | None]]:
    """Real vs simulated tokens/s of every configuration the simulator covers (``error`` at each run's own
    machine speed; ``error_at_probe_speed`` at its session block's probes)."""
    out: dict[str, dict[str, float | None]] = {}
    for name, sim in headline.simulated.items():
        if name not in headline.real:
            continue
        real_tps = headline.summaries[name].tokens_per_s
        sim_tps = summarize(sim).tokens_per_s
        probe = headline.simulated_at_probe_speed.get(name)
        probe_tps = summarize(probe).tokens_per_s if probe else None
        out[name] = {"real_tokens_per_s": real_tps, "sim_tokens_per_s": sim_tps,
                     "error": sim_tps / real_tps - 1.0 if real_tps else None,
                     "error_at_probe_speed": probe_tps / real_tps - 1.0 if real_tps and probe_tps else None,
                     "real_stall_s": headline.summaries[name].stall_s, "sim_stall_s": summarize(sim).stall_s,
                     "components": {"real": _components(headline.real[name]), "sim": _components(sim)}}
    return out


def _components(runs: Sequence[RunMeasure]) -> dict[str, float]:
    """Where a configuration's time went, summed over its sessions: rounds and seconds of verification, draft
    work, stalls, and everything else (prefill, bookkeeping, ticks, the predictor)."""
    verify, draft = sum(r.verify_s for r in runs), sum(r.draft_s + r.extra_s for r in runs)
    stall, wall = sum(r.stall_s for r in runs), sum(r.wall_s for r in runs)
    return {"rounds": float(sum(r.rounds for r in runs)), "verify_s": verify, "draft_s": draft, "stall_s": stall,
            "outside_s": wall - verify - draft - stall}
