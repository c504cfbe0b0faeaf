#!/usr/bin/env python3
"""A short real run of every policy on multi-domain sessions, with the simulator beside it.

    python bench/runtime_demo.py                 # budget 2 drafts, load/round ratio ~2.7

What it does, in order:
1. builds multi-domain sessions from the held-out prompts (a topic shift every turn) plus one
   separate calibration session from other held-out prompts;
2. records the exact greedy trace of every session (for the oracle and the simulator);
3. measures the cost model on the real target and drafts, measures the mean round time, and
   sets the emulated storage bandwidth so that loading the mean draft takes ``--ratio`` rounds;
4. calibrates the runtime's bookkeeping overheads on the calibration session;
5. runs every policy for real on every session (fresh runtime, same initial working set),
   then simulates the same session with the same policy code;
6. prints a table and writes JSON under ``results/runtime_demo/``.
Its last line is the path of the JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", type=Path, default=REPO / "models" / "zoo")
    ap.add_argument("--prompts", type=Path, default=REPO / "models" / "heldout" / "prompts.jsonl")
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--budget", type=int, default=2, help="drafts that fit in memory")
    ap.add_argument("--ratio", type=float, default=2.7, help="target load time / round time")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--check-interval", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="torch threads for decoding (the loader gets the rest)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--policies", default="all")
    ap.add_argument("--repeats", type=int, default=3,
                    help="real runs per (policy, session); the fastest counts (the machine is shared)")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "runtime_demo")
    args = ap.parse_args()

    import numpy as np
    import torch

    from memspec_ros.core.engine import SpeculativeEngine
    from memspec_ros.core.model_loading import load_causal_lm, load_tokenizer
    from memspec_ros.runtime import (
        ADAPTIVE_BASELINES,
        POLICY_NAMES,
        BackgroundLoader,
        Budget,
        Catalogue,
        DraftPool,
        DraftPredictor,
        DraftRuntime,
        RuntimeConfig,
        SessionTrace,
        Simulator,
        StorageModel,
        calibrate_overheads,
        load_zoo_manifest,
        make_materializer,
        make_policy,
        measure_cost_model,
        record_session,
        zoo_fingerprint,
    )
    from memspec_ros.runtime.cost_model import min_cost_model
    from memspec_ros.runtime.workload import load_prompts, multi_domain_sessions

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    args.out.mkdir(parents=True, exist_ok=True)
    t_begin = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_begin:6.1f}s] {msg}", flush=True)

    manifest = load_zoo_manifest(args.zoo)
    catalogue = Catalogue.from_zoo(args.zoo)
    tok = load_tokenizer(manifest.target)
    engine = SpeculativeEngine(load_causal_lm(manifest.target), tok)
    predictor_path = args.zoo / "predictor.safetensors"
    budget = Budget.drafts(args.budget)
    policies = list(POLICY_NAMES) if args.policies == "all" else args.policies.split(",")

    # 1. workload: evaluation sessions + a calibration session with different prompts
    prompts = load_prompts(args.prompts)
    meta_path = predictor_path.with_suffix(".json")
    trained_on = set(json.loads(meta_path.read_text()).get("train_prompt_sha1", [])) if meta_path.exists() else set()
    dropped = 0
    for domain, rows in prompts.items():  # never evaluate on a prompt the predictor was trained on
        kept = [p for p in rows if hashlib.sha1(p.encode()).hexdigest() not in trained_on]
        dropped += len(rows) - len(kept)
        prompts[domain] = kept
    log(f"held-out prompts: {sum(map(len, prompts.values()))} ({dropped} dropped: identical to predictor "
        f"training prompts{'' if trained_on else '; no training list found'})")
    all_sessions = multi_domain_sessions(prompts, sessions=args.sessions + 1, turns=args.turns,
                                         max_new_tokens=args.max_new_tokens, seed=args.seed)
    sessions, calib_session = all_sessions[:-1], all_sessions[-1][:3]

    # 2. exact traces
    materialize = make_materializer(catalogue)
    proposers = {s.name: materialize(s, [p.read_bytes() for p in s.weight_files]) for s in catalogue}
    drafts = {n: p.model for n, p in proposers.items()}

    def helper(turn):
        spec = catalogue.by_domain(turn.domain) if turn.domain else None
        return proposers[spec.name] if spec else None

    fingerprint = zoo_fingerprint([manifest.target, *(s.path for s in catalogue)])
    traces = []
    for i, turns in enumerate([*sessions, calib_session]):
        key = hashlib.sha1(json.dumps([fingerprint, [[t.prompt, t.max_new_tokens] for t in turns]])
                           .encode()).hexdigest()[:12]
        path = args.out / f"trace-{key}.npz"
        tr = SessionTrace.load(path) if path.exists() else None
        if tr is None or set(tr.drafts) != set(catalogue.names):
            tr = record_session(engine, drafts, turns, name=f"session-{i}", helper=helper, k=args.k)
            tr.save(path)
        traces.append(tr)
    traces, calib_trace = traces[:-1], traces[-1]
    log(f"traces: {[t.generated_tokens for t in traces]} tokens; "
        f"domains {[[t.domain for t in s] for s in sessions]}")

    # 3. cost model. The machine is shared: contention only ever slows things down, so every
    #    calibration figure is the minimum over --repeats measurements.
    ctx = [t for turn in traces[0].turns for t in (*turn.prompt_ids, *turn.output_ids)]
    calib_prompts = [t.prompt for t in calib_session]
    costs = []
    for _ in range(args.repeats):
        # real rounds (cold caches after the target's forward) replace microbenchmark proposals
        costs.append(measure_cost_model(engine.target, proposers, ctx, args.k, engine=engine,
                                        round_prompts=calib_prompts, max_new_tokens=args.max_new_tokens))
    cost = min_cost_model(costs)
    mean_size = float(np.mean([s.stored_bytes for s in catalogue]))  # bytes a load reads

    def measure_loads(storage: StorageModel) -> dict[str, float]:
        pool = DraftPool(catalogue, Budget.unlimited())
        loader = BackgroundLoader(pool, materialize, storage)
        for s in catalogue:
            for _ in range(max(2, args.repeats)):
                loader.request(s.name).wait(60)
                pool.evict(s.name)
        out = {s.name: float(min(r.load_s for r in loader.records() if r.name == s.name)) for s in catalogue}
        loader.close()
        return out

    def build_policy(name: str, trace: SessionTrace):
        return make_policy(name, predictor=DraftPredictor.load(predictor_path, catalogue.names)
                           if name.startswith("memspec") and name != "memspec-manage-only" else None,
                           oracle=trace)

    # 4. the round time memspec actually sees (bigger drafts, catch-ups) sets the bandwidth for
    #    the requested load/round ratio; the same calibration runs fix the bookkeeping overheads.
    unthrottled = measure_loads(StorageModel())
    materialize_s = float(np.mean(list(unthrottled.values())))
    best = None
    for _ in range(args.repeats):
        rt = DraftRuntime(engine, catalogue, budget, build_policy("memspec", calib_trace),
                          RuntimeConfig(k=args.k, check_interval=args.check_interval))
        rt.warm_up()
        reports = rt.run_dialogue(calib_session)
        stats = rt.statistics()
        rt.close()
        if best is None or sum(r.wall_s for r in reports) < sum(r.wall_s for r in best[0]):
            best = (reports, stats)
    assert best is not None
    round_s = best[1].mean_round_s
    cost = calibrate_overheads(cost, best[0], best[1])
    read_s = max(1e-3, args.ratio * round_s - materialize_s)
    storage = StorageModel(bandwidth_bytes_per_s=mean_size / read_s)
    cost.load_s = measure_loads(storage)
    mean_load = float(np.mean(list(cost.load_s.values())))
    config = RuntimeConfig(k=args.k, check_interval=args.check_interval, storage=storage)
    log(f"round {round_s * 1e3:.1f} ms; unthrottled load {materialize_s * 1e3:.1f} ms; emulated storage "
        f"{storage.bandwidth_bytes_per_s / 1e6:.1f} MB/s -> mean load {mean_load * 1e3:.1f} ms "
        f"(ratio {mean_load / round_s:.2f})")
    log(f"calibrated: round overhead {cost.round_overhead_s * 1e3:.2f} ms, tick {cost.tick_s * 1e3:.2f} ms, "
        f"predictor {cost.predictor_s * 1e6:.0f} us, turn overhead {cost.turn_overhead_s * 1e3:.1f} ms")

    # target-only reference (best of repeats per session)
    t_tokens = t_wall = 0.0
    for turns in sessions:
        walls = []
        for _ in range(args.repeats):
            conv_session, wall, tokens = None, 0.0, 0
            for turn in turns:
                t0 = time.perf_counter()
                conv_session = engine.run_turn(conv_session, turn.prompt, turn.max_new_tokens)
                wall += time.perf_counter() - t0
                tokens += len(conv_session.output_ids)
            walls.append(wall)
        t_wall += min(walls)
        t_tokens += tokens
    results: dict = {"target-only": {"tokens_per_s": t_tokens / t_wall}}

    # 5. every policy, real (best of --repeats per session) then simulated
    per_session: dict = {}
    for name in policies:
        real_tok = real_wall = acc = prop = stall = switches = loads = 0.0
        sim_tok = sim_wall = sim_stall = 0.0
        ratios, pred_frac, outputs_ok = [], [], True
        per_session[name] = []
        for turns, trace in zip(sessions, traces, strict=True):
            best = None
            for _ in range(args.repeats):
                rt = DraftRuntime(engine, catalogue, budget, build_policy(name, trace), config)
                rt.warm_up()
                reports = rt.run_dialogue(turns)
                st = rt.statistics()
                rt.close()
                outputs_ok &= [r.output_ids for r in reports] == [t.output_ids for t in trace.turns]
                if best is None or sum(r.wall_s for r in reports) < sum(r.wall_s for r in best[0]):
                    best = (reports, st)
            assert best is not None
            reports, st = best
            real_tok += sum(r.tokens for r in reports)
            real_wall += sum(r.wall_s for r in reports)
            acc += sum(r.accepted for r in reports)
            prop += sum(r.proposed for r in reports)
            stall += sum(r.stall_s for r in reports)
            switches += sum(r.switches for r in reports)
            loads += sum(r.loads for r in reports)
            pred_frac.append(st.predictor_fraction)
            if st.load_round_ratio is not None:
                ratios.append(st.load_round_ratio)
            sim = Simulator(catalogue, budget, build_policy(name, trace), cost, config)
            sim.warm_up()
            res = sim.run(trace)
            sim_tok += res.tokens
            sim_wall += res.wall_s
            sim_stall += res.stall_s
            session_tps = sum(r.tokens for r in reports) / sum(r.wall_s for r in reports)
            per_session[name].append({"real_tokens_per_s": session_tps, "sim_tokens_per_s": res.tokens_per_s})
        real_tps, sim_tps = real_tok / real_wall, sim_tok / sim_wall
        results[name] = {
            "tokens_per_s": real_tps, "acceptance_rate": acc / prop if prop else 0.0, "stall_s": stall,
            "switches": switches, "loads": loads, "load_round_ratio": float(np.mean(ratios)) if ratios else None,
            "predictor_fraction": float(np.max(pred_frac)) if pred_frac else 0.0,
            "greedy_output_identical": bool(outputs_ok), "sim_tokens_per_s": sim_tps, "sim_stall_s": sim_stall,
            "sim_error": sim_tps / real_tps - 1.0, "sessions": per_session[name]}
        r = results[name]
        log(f"{name:21s} real {real_tps:6.1f} tok/s  sim {sim_tps:6.1f} ({r['sim_error'] * 100:+5.1f}%)  "
            f"acc {r['acceptance_rate']:.2f}  stall {stall:5.2f}s  switches {switches:3.0f}  loads {loads:3.0f}  "
            f"ratio {r['load_round_ratio'] or 0:.2f}  pred {r['predictor_fraction'] * 100:.2f}%  "
            f"identical={outputs_ok}  load avg {os.getloadavg()[0]:.1f}")

    adaptive = [p for p in ADAPTIVE_BASELINES if p in results]
    best_adaptive = max(adaptive, key=lambda p: results[p]["tokens_per_s"]) if adaptive else None
    summary = {
        "config": {"budget_drafts": args.budget, "k": args.k, "check_interval": args.check_interval,
                   "target_ratio": args.ratio, "bandwidth_MBps": storage.bandwidth_bytes_per_s / 1e6,
                   "threads": args.threads, "sessions": args.sessions, "turns": args.turns,
                   "max_new_tokens": args.max_new_tokens, "seed": args.seed,
                   "drafts": {s.name: s.size_bytes for s in catalogue},
                   "repeats": args.repeats, "measured_round_s": round_s, "mean_load_s": mean_load,
                   "measured_load_round_ratio": mean_load / round_s, "cost_model": json.loads(cost.to_json())},
        "policies": results,
        "best_adaptive_baseline": best_adaptive,
    }
    if best_adaptive and "memspec" in results:
        summary["memspec_vs_best_adaptive"] = (results["memspec"]["tokens_per_s"]
                                               / results[best_adaptive]["tokens_per_s"])
        log(f"memspec / best adaptive ({best_adaptive}) = {summary['memspec_vs_best_adaptive']:.3f}")
    out = args.out / f"runtime_demo-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(summary, indent=1))
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
