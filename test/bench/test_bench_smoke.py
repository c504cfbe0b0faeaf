"""Fast checks of the evaluation harness (``python -m bench``), no timing assertions.

* the workload builder is deterministic and never uses a prompt the predictor was trained on;
* the bundled predictor's training report names that predictor, so its training prompts are known;
* without ``--catalogue`` a run measures the bundled zoo on ``models/zoo/heldout/prompts.jsonl``, and
  the options that point it at another catalogue reach the configuration and its command line;
* a tiny simulator-only experiment goes through the same results/report/plot writers as a real
  run and produces every documented key (real runs are what ``make bench`` is for).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the ``bench`` package lives at the repository root

ZOO = REPO / "models" / "zoo"
PROMPTS = ZOO / "heldout" / "prompts.jsonl"


def _prompts() -> dict[str, list[str]]:
    from memspec_ros.runtime.workload import load_prompts

    return load_prompts(PROMPTS)


def test_workload_is_deterministic() -> None:
    from bench.workloads import build_workload

    kwargs = {"sessions": 4, "turns": 6, "max_new_tokens": 32, "shift_rates": (1, 2, 3), "seed": 11}
    a = build_workload(_prompts(), **kwargs)
    b = build_workload(_prompts(), **kwargs)
    assert a == b
    assert build_workload(_prompts(), **{**kwargs, "seed": 12}).sessions != a.sessions
    assert [s.shift_every for s in a.sessions] == [1, 2, 3, 1]
    for s in a.sessions:
        assert s.turns[0].domain == "robot"
        assert len({t.prompt for t in s.turns}) == len(s.turns)  # never the same prompt twice in a session
        assert len(s.topic_shifts) >= 1
        if s.shift_every == 1:
            assert len(s.topic_shifts) == len(s.turns) - 1
        # one conversation per topic segment, unless the context is carried across topics
        assert len(s.conversations) == len(s.topic_shifts) + 1
        assert [t for c in s.conversations for t in c] == list(s.turns)
    carried = build_workload(_prompts(), **kwargs, carry_context=True)
    assert [s.turns for s in carried.sessions] == [s.turns for s in a.sessions]
    assert all(len(s.conversations) == 1 for s in carried.sessions)


def test_workload_uses_only_evaluation_prompts() -> None:
    from bench.workloads import build_workload

    prompts = _prompts()
    heldout = {p for ps in prompts.values() for p in ps}
    banned = {ps[0] for ps in prompts.values()} | {ps[3] for ps in prompts.values()}
    wl = build_workload(prompts, exclude=banned, sessions=6, turns=8, max_new_tokens=32, seed=3)
    used = set(wl.prompts)
    calib = {t.prompt for t in wl.calibration.turns}
    assert used <= heldout and calib <= heldout
    assert not (used | calib) & banned
    assert not used & calib  # the calibration session never shares a prompt with the evaluation
    assert wl.excluded_prompts == len(banned)


def test_predictor_training_prompts_are_never_evaluated() -> None:
    from bench.split import load_training_prompts, prompt_hash
    from bench.workloads import build_workload

    training = load_training_prompts(ZOO / "predictor.safetensors")
    assert training.hashes, f"cannot tell which prompts trained the predictor ({training.source}): " \
                            "models/zoo/reports/predictor.json must be the training report of " \
                            "models/zoo/predictor.safetensors (memspec_build predictor writes both)"
    assert training.source.endswith("models/zoo/reports/predictor.json")
    for preset in ({"sessions": 3, "turns": 5}, {"sessions": 6, "turns": 8}):  # quick and full sizes
        wl = build_workload(_prompts(), exclude=training, max_new_tokens=48, seed=7, **preset)
        for p in [*wl.prompts, *(t.prompt for t in wl.calibration.turns)]:
            assert prompt_hash(p) not in training.hashes


def test_default_inputs_are_the_default_model_set_and_its_heldout_prompts() -> None:
    from bench.config import BenchConfig
    from bench.run import parse_args

    default = REPO / "models" / "smollm2"
    for cfg in (BenchConfig(), BenchConfig.quick(), parse_args([]), parse_args(["--quick"])):
        assert cfg.bundled and cfg.bundled_set == "smollm2"
        assert cfg.prompts_file == default / "heldout" / "prompts.jsonl" and cfg.dtype == "auto"
        assert "--catalogue" not in cfg.command and "--prompts" not in cfg.command
        assert cfg.make_command in ("make bench", "make bench-quick")
    assert parse_args([]).catalogue == default / "catalogue.yaml"
    assert parse_args([f"--catalogue={default}"]).bundled  # the folder names the same file
    zoo = parse_args([f"--catalogue={ZOO}"])  # the 17 M fixture: a bundled set with its own targets
    assert zoo.bundled_set == "zoo" and not zoo.bundled and zoo.prompts_file == PROMPTS


def test_thread_options_default_to_the_nodes_auto_setting() -> None:
    from bench.run import parse_args
    from bench.thread_settings import beside_counts

    full, quick = parse_args([]), parse_args(["--quick"])
    assert full.threads == 0 and quick.threads == 0  # num_threads: 0, the node's default
    assert full.beside_threads is None and quick.beside_threads == ()
    cfg = parse_args(["--threads", "2", "--beside-threads", "1,4"])
    assert cfg.threads == 2 and cfg.beside_threads == (1, 4)
    assert "--threads 2" in cfg.command and "--beside-threads 1,4" in cfg.command
    assert parse_args(["--beside-threads", "none"]).beside_threads == ()
    assert "--beside-threads none" in parse_args(["--beside-threads", "none"]).command
    assert beside_counts((1, 2, 4), 2) == [1, 4]
    assert 1 not in beside_counts(None, 1)
    for bad in (["--threads", "-1"], ["--beside-threads", "0"], ["--beside-threads", "two"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_catalogue_options_reach_the_configuration(tmp_path: Path) -> None:
    from bench.run import parse_args

    catalogue = tmp_path / "my_models"
    (catalogue / "heldout").mkdir(parents=True)
    (catalogue / "heldout" / "prompts.jsonl").write_text('{"domain": "a", "prompt": "x"}\n')
    cfg = parse_args(["--quick", "--catalogue", str(catalogue), "--home-domain", "a"])
    assert not cfg.bundled and cfg.prompts_file == catalogue / "heldout" / "prompts.jsonl"
    assert f"--catalogue {catalogue}" in cfg.command and "--home-domain a" in cfg.command
    assert "--prompts" not in cfg.command  # the default beside the catalogue
    assert cfg.make_command == f"make bench-quick CATALOGUE={catalogue}"
    other = tmp_path / "other.jsonl"
    cfg = parse_args(["--catalogue", str(catalogue), "--prompts", str(other)])
    assert cfg.prompts_file == other and f"--prompts {other}" in cfg.command
    bare = tmp_path / "bare"  # no prompts of its own: the run stops and says to pass --prompts
    bare.mkdir()
    assert parse_args(["--catalogue", str(bare)]).prompts_file == bare / "heldout" / "prompts.jsonl"


def test_home_domain_falls_back_to_the_prompts_files_first_domain() -> None:
    import pytest

    from bench.inputs import domain_mismatch
    from bench.workloads import build_workload

    prompts = {"warehouse": [f"w{i}" for i in range(6)], "chat": [f"c{i}" for i in range(6)],
               "arith": [f"a{i}" for i in range(6)]}
    wl = build_workload(prompts, sessions=3, turns=4, max_new_tokens=8, seed=1)
    assert wl.home_domain == "warehouse" and all(s.turns[0].domain == "warehouse" for s in wl.sessions)
    assert wl.describe()["home_domain"] == "warehouse"
    chosen = build_workload(prompts, sessions=3, turns=4, max_new_tokens=8, seed=1, home="arith")
    assert all(s.turns[0].domain == "arith" for s in chosen.sessions)
    with pytest.raises(ValueError, match="no evaluation prompts"):
        build_workload(prompts, sessions=1, turns=2, max_new_tokens=8, home="robot")
    assert build_workload(_prompts(), sessions=2, turns=2, max_new_tokens=8).home_domain == "robot"
    assert domain_mismatch(prompts, ["robot", "general"]) is not None
    assert domain_mismatch(prompts, ["chat", "general"]) is None


def test_results_writer_produces_documented_shape(tmp_path: Path) -> None:
    """A simulator-only mini experiment through the real assembly, report and plot code."""
    from bench.calibration import Calibration
    from bench.config import BenchConfig
    from bench.drift import Drift, compute_drift, other_factor, outside_rounds_s, verification_speed
    from bench.experiments import (
        HF_ASSISTED,
        HF_ASSISTED_HEURISTIC,
        HF_PROMPT_LOOKUP,
        TARGET_ONLY,
        Bench,
        Headline,
        ablation,
        run_sweeps,
    )
    from bench.hf_assisted import best_single_draft, single_draft_rounds
    from bench.measures import RunMeasure
    from bench.plots import draw_all
    from bench.policy_factory import BENCH_POLICIES as POLICY_NAMES
    from bench.policy_factory import PolicyFactory
    from bench.progress import Progress
    from bench.report import render_report
    from bench.results import REQUIRED_CONFIGS, assemble_results, load_results, shape_problems, write_results
    from bench.scaling import catalogue_scaling, dialogue_length_scaling
    from bench.sim_runs import model_target_only, simulate
    from bench.speed_probe import target_step_s
    from bench.split import load_training_prompts
    from bench.testbed import load_testbed
    from bench.thread_settings import thread_settings
    from bench.timeline import session_timeline
    from bench.trace_cache import session_traces
    from bench.workloads import build_workload
    from memspec_ros.core.thread_tuning import ThreadChoice
    from memspec_ros.runtime import CostModel, StorageModel

    cfg = BenchConfig.quick(sessions=2, turns=3, max_new_tokens=10, k=4, check_interval=4, check_intervals=(2, 4),
                            budgets=(1, None),
                            ratios=(1.0, 4.0), lengths=(1, 3), out=tmp_path, cache=tmp_path / "cache",
                            catalogue=ZOO / "catalogue.yaml", dtype="float32")
    testbed = load_testbed(cfg.catalogue, 1, cfg.dtype)
    training = load_training_prompts(testbed.predictor_path)
    wl = build_workload(_prompts(), exclude=training, sessions=cfg.sessions, turns=cfg.turns,
                        max_new_tokens=cfg.max_new_tokens, seed=cfg.seed)
    traces = session_traces(testbed, wl.sessions, cfg.cache, cfg.k)
    names = testbed.catalogue.names
    # A made-up time model (no measuring): the point is the shape of what comes out.
    cost = CostModel(verify_s=dict.fromkeys(range(cfg.k + 1), 0.010), draft_step_s=dict.fromkeys(names, 0.001),
                     draft_feed_s=dict.fromkeys(names, (0.001, 0.0001)), prefill_s=(0.005, 0.0001),
                     load_s=dict.fromkeys(names, 0.04))
    cal = Calibration(cost=cost, storage=StorageModel.mb_per_s(50), round_s=0.015,
                      unthrottled_load_s=dict.fromkeys(names, 0.005), requested_ratio=2.7, seconds=0.0)
    bench = Bench(cfg=cfg, testbed=testbed, workload=wl, traces=traces, calibration=cal,
                  factory=PolicyFactory(testbed.predictor_path, names), policies=list(POLICY_NAMES),
                  progress=Progress(enabled=False))

    sims = {n: [simulate(testbed.catalogue, bench.budget, bench.factory, n, tr, cost, bench.runtime_config())
                for tr in traces] for n in POLICY_NAMES}
    hf_draft = best_single_draft(traces, names, cost, cfg.k)
    hf: dict[str, list[RunMeasure]] = {HF_ASSISTED: [], HF_ASSISTED_HEURISTIC: []}
    for name, schedule in ((HF_ASSISTED, "constant"), (HF_ASSISTED_HEURISTIC, "heuristic")):
        for tr in traces:
            r = single_draft_rounds(tr, hf_draft, cost, cfg.k, schedule)
            hf[name].append(RunMeasure(tr.name, r.tokens, r.seconds, r.rounds, r.proposed, r.accepted))
    hf[HF_PROMPT_LOOKUP] = [RunMeasure(tr.name, tr.generated_tokens, 0.01 * tr.generated_tokens) for tr in traces]
    reports: list = []
    simulate(testbed.catalogue, bench.budget, bench.factory, "memspec", traces[0], cost, bench.runtime_config(),
             keep_reports=reports)
    timeline = session_timeline("memspec", wl.sessions[0], reports)
    # Drift: the simulated rounds cost exactly the model's compute time (no context slope here).
    drift = compute_drift(cost, [reports])
    assert drift.overall == pytest.approx(1.0) and drift.verify == pytest.approx(1.0)
    assert all(x == pytest.approx(1.0) for x in drift.drafts.values()) and drift.drafts
    slower = compute_drift(cost.compute_scaled(0.5, {d: 0.25 for d in drift.drafts}), [reports])
    assert slower.verify == pytest.approx(2.0) and all(x == pytest.approx(4.0) for x in slower.drafts.values())
    assert compute_drift(drift.apply(cost), [reports]).overall == pytest.approx(1.0)
    assert drift.loading == pytest.approx(1.0) and drift.apply(cost).loading_factor == pytest.approx(1.0)
    # A slow spell: the second run's machine ran at half speed (its block's probes say 2.0). Divided out, the
    # runtime's drift is the same for both; each run is simulated at its block's speed.
    slow_reports: list = []
    simulate(testbed.catalogue, bench.budget, bench.factory, "memspec", traces[0], cost.compute_scaled(2.0),
             bench.runtime_config(), keep_reports=slow_reports)
    blocks = compute_drift(cost, [reports, slow_reports], [1.0, 2.0])
    assert blocks.overall == pytest.approx(1.0, rel=0.02)
    assert compute_drift(blocks.at_speed(2.0).apply(cost), [slow_reports]).overall == pytest.approx(1.0, rel=0.02)
    assert 1.0 < compute_drift(cost, [reports, slow_reports]).overall < 2.0, "without the probes: a blend"
    # A run's own verifications say how fast the machine ran it: the slow spell is read from the run itself.
    assert verification_speed(cost, reports) == pytest.approx(1.0, rel=1e-6)
    assert verification_speed(cost, slow_reports) == pytest.approx(2.0, rel=1e-6)
    assert verification_speed(cost, []) is None
    # Time outside rounds (prefill, bookkeeping, ticks, predictor): measured apart from the rounds' speed.
    assert other_factor([reports], [reports]) == pytest.approx(1.0) and outside_rounds_s(reports) > 0
    heavy: list = []
    simulate(testbed.catalogue, bench.budget, bench.factory, "memspec", traces[0],
             Drift(verify=1.0, other=2.0).apply(cost), bench.runtime_config(), keep_reports=heavy)
    assert other_factor([heavy], [reports]) == pytest.approx(2.0, rel=0.1)
    assert Drift(verify=1.0, other=2.0).apply(cost).verify(2) == pytest.approx(cost.verify(2)), "rounds untouched"
    slowed = simulate(testbed.catalogue, bench.budget, bench.factory, "memspec", traces[0],
                      dataclasses.replace(cost, loading_factor=3.0),
                      bench.runtime_config())
    plain = simulate(testbed.catalogue, bench.budget, bench.factory, "memspec", traces[0], cost, bench.runtime_config())
    assert slowed.wall_s > plain.wall_s, "rounds during a load cost more when the model says so"
    assert cost.compute_scaled(0.5).load_s == cost.load_s, "loads are paced storage time, not compute"
    headline = Headline(real={**sims, TARGET_ONLY: [model_target_only(tr, cost) for tr in traces], **hf},
                        simulated=sims, timelines={"memspec": timeline}, hf_draft=hf_draft)
    experiments = {"ablation": ablation(bench, headline), **run_sweeps(bench),
                   "scaling": {"catalogue_size": catalogue_scaling(bench, (6, 12)),
                               "dialogue_length": dialogue_length_scaling(bench, 12)}}
    results = assemble_results(bench, headline, experiments, training, "test")
    # The headline at the auto-chosen count, another count beside it (here the same runs: shape only).
    choice = ThreadChoice(threads=1, round_s={1: 0.02, 2: 0.025})
    results["thread_settings"] = thread_settings(bench, headline, choice, {2: (headline, cal)})

    assert shape_problems(results) == []
    path = write_results(results, tmp_path)
    loaded = load_results(path)
    assert shape_problems(loaded) == []
    assert set(loaded["policies"]) == set(REQUIRED_CONFIGS)
    for name in REQUIRED_CONFIGS:
        entry = loaded["policies"][name]
        for key in ("tokens_per_s", "acceptance_rate", "stall_s", "mean_accepted_length", "switches", "loads",
                    "peak_memory_bytes"):
            assert key in entry, (name, key)
    for name in POLICY_NAMES:
        assert {"real_tokens_per_s", "sim_tokens_per_s"} <= set(loaded["simulator_validation"][name])
    assert [t["target"] for t in loaded["targets"]] == ["best adaptive baseline", "oracle", "target-only",
                                                         "hf-assisted", "hf-assisted (heuristic schedule)"]
    assert all(t["why"] for t in loaded["targets"])
    sweep = loaded["experiments"]["budget"]
    assert sweep["values"] == [1, "all"]
    assert all(len(sweep["policies"][n]["tokens_per_s"]) == 2 for n in POLICY_NAMES)
    for key in ("models", "k", "budget_drafts", "check_interval", "emulated_bandwidth_bytes_per_s",
                "measured_load_round_ratio", "threads", "commands", "split", "workload"):
        assert key in loaded["config"], key

    scaling = loaded["experiments"]["scaling"]
    assert scaling["catalogue_size"]["values"] == [6, 12]
    for entry in scaling["catalogue_size"]["policies"].values():
        assert len(entry["tokens_per_s"]) == 2 and all(v > 0 for v in entry["runtime_us_per_round"])
    assert scaling["dialogue_length"]["context_used"] <= scaling["dialogue_length"]["context_window"]
    report = render_report(loaded)
    assert "## Experiment 7: scaling" in report
    empty = [w is None for w in scaling["dialogue_length"]["policies"]["memspec"]["runtime_us_per_round"]]
    assert ("| no turn |" in report) == any(empty), "a context bucket no turn reached reads 'no turn', not 0 tok/s"
    ts = loaded["thread_settings"]
    assert ts["headline_threads"] == 1 and ts["auto"] and [s["threads"] for s in ts["settings"]] == [1, 2]
    for st in ts["settings"]:
        assert set(POLICY_NAMES) <= set(st["simulator_validation"])
        assert st["simulator_worst"]["within_tolerance"]  # simulated against itself: no error
        assert st["memspec_vs"]["target-only"] > 0
    assert "## Thread settings" in report and "chose 1 thread(s)" in report and "| 2 |" in report
    alone = {**loaded, "thread_settings": {**ts, "settings": ts["settings"][:1]}}
    text = render_report(alone)  # the quick preset: auto, no other count measured, so no "fastest" claim
    assert "No other count was measured" in text and "chose 1 thread(s)" in text and "fastest" not in text
    drifted = {**loaded, "calibration": {**loaded["calibration"], "drift": dataclasses.asdict(blocks),
                                         "block_speeds": [1.2, 0.9], "run_speeds": {"memspec": [0.8, 1.3]}}}
    text = render_report(drifted)
    assert "(0.80-1.30x the calibration's here" in text and "probed between the runs" in text
    assert "error at probe speed" in text and "Where the simulated time differs from the real" in text
    # Target-only's time model: the measured model at its runs' speed (the probes' before any), not the drift.
    probed = dataclasses.replace(cal, cost=cost.compute_scaled(3.0), measured=cost, block_speeds=(1.0, 1.5))
    assert probed.target_only_cost().verify(0) == pytest.approx(cost.verify(0) * 1.25)
    own = dataclasses.replace(probed, run_speeds={"target-only": (2.0, 2.0)})
    assert own.target_only_cost().verify(0) == pytest.approx(cost.verify(0) * 2.0)
    assert model_target_only(traces[0], cost).verify_s < model_target_only(traces[0], cost).wall_s
    assert target_step_s(testbed.engine, testbed.engine.encode("USER: hello"), steps=3) > 0
    sloped = dataclasses.replace(cost, verify_slope_s=1e-4)  # target-only steps are charged at their context
    assert model_target_only(traces[0], sloped).wall_s > model_target_only(traces[0], cost).wall_s
    fixed = {**loaded, "thread_settings": {**ts, "settings": ts["settings"][:1], "auto": False, "auto_round_ms": None}}
    assert "## Thread settings" not in render_report(fixed)  # --threads N alone: the configuration says it all
    for heading in ("## Configuration", "## Reproduce", "## Targets", "## Experiment 1", "## Experiment 2",
                    "## Experiments 3-6", "## Simulator vs real", "## Workload and the predictor split"):
        assert heading in report
    assert "python -m bench --quick" in report
    assert loaded["config"]["catalogue"] == {  # which models were measured: the zoo, a bundled set
        "path": "models/zoo/catalogue.yaml", "bundled": False, "model_set": "zoo",
        "prompts": "models/zoo/heldout/prompts.jsonl", "home_domain": "robot",
        "domains": {n: testbed.catalogue.get(n).domain for n in names}}
    assert "Catalogue measured: `models/zoo/catalogue.yaml`" in report
    assert "make bench-quick CATALOGUE=models/zoo/catalogue.yaml" in report
    assert all(t["scope"] == "project" for t in loaded["targets"]), "the zoo is measured against its own targets"
    files = {p.name for p in draw_all(loaded, tmp_path)}
    assert {"headline.png", "metrics.png", "timeline.png", "sweep_budget.png", "sweep_ratio.png",
            "sweep_check_interval.png", "sweep_length.png"} <= files


def test_the_learning_experiment_picks_a_domain_any_catalogue_has() -> None:
    """``make bench`` runs the online-learning experiment on a user's catalogue too: without ``--mix``
    the shifted mix favours code where the catalogue has it, else its first specialised domain."""
    from bench.learning_shift import default_domain

    assert default_domain(_prompts()) == "code"
    assert default_domain({"general": [], "perl": [], "changelog": []}) == "changelog"
    assert default_domain({"general": []}) == "general"


def test_learning_real_runs_interleave_turns_and_bound_their_ratios() -> None:
    """The real arm of the learning experiment: every arm serves every turn in its own conversation
    (one rate per arm and session), the learning arm learns, and each real ratio carries a bootstrap
    interval that holds the ratio itself."""
    import copy

    from bench.learning_shift import paired_interval, real_rates, real_summary
    from bench.testbed import load_testbed
    from bench.workloads import build_workload
    from memspec_ros.runtime import Budget, RuntimeConfig
    from memspec_ros.runtime.ngram_member import NgramSettings
    from memspec_ros.runtime.policies import MemSpecPolicy
    from memspec_ros.runtime.predictor import DraftPredictor

    testbed = load_testbed(ZOO / "catalogue.yaml", 1, "float32")
    sessions = build_workload(_prompts(), sessions=2, turns=2, max_new_tokens=6, seed=3).sessions
    shipped = DraftPredictor.load(testbed.predictor_path, testbed.catalogue.names)
    arms = {"shipped": (MemSpecPolicy(copy.deepcopy(shipped)), False),
            "online": (MemSpecPolicy(copy.deepcopy(shipped)), True)}
    shares: dict[str, list[float]] = {}
    rates = real_rates(testbed, arms, Budget.drafts(2), RuntimeConfig(k=4, ngram=NgramSettings()), sessions,
                       learned_share=shares)
    assert set(rates) == {"shipped", "online"}
    assert all(len(r) == len(sessions) and all(x > 0 for x in r) for r in rates.values())
    turns = sum(len(s.turns) for s in sessions)
    assert 0 < arms["online"][0].ngram_value.replayed_turns <= turns  # it learned between its turns
    assert arms["shipped"][0].ngram_value.replayed_turns == 0
    assert set(shares) == {"online"} and len(shares["online"]) == len(sessions)
    assert all(0.0 <= x <= 1.0 for x in shares["online"])

    low, high = paired_interval([2.0, 4.0, 3.0], [2.0, 4.0, 3.0])
    assert low == pytest.approx(1.0) and high == pytest.approx(1.0)
    summary = real_summary({"online": [1.0, 2.0, 3.0, 4.0], "offline-new-mix": [1.1, 2.0, 2.9, 4.5],
                            "shipped": [1.0, 1.0, 1.0, 1.0], "cold-start": [1.0, 2.0, 3.0, 4.0]}, after=1)
    ratio, (low, high) = summary["online_vs_offline_new_mix"], summary["online_vs_offline_new_mix_interval"]
    assert low <= ratio <= high and ratio == pytest.approx(9.0 / 9.4)
