"""Online learning experiments: a shifted mix of topics, and a cold start (simulated on exact traces).

``python -m bench.learning_shift [--catalogue models/zoo] [--mix code=0.7] [--real]``

The predictor ships trained for the catalogue's own mix of topics (the corpora's). A robot's users
talk about something else: here, a mix where one domain has ``share`` of the turns (default:
code, 70%). Every configuration serves the same sessions, one after the other, with one policy
object that lives through all of them, as a node does:

* **shipped**: memspec with the shipped predictor (its per-session corrections only);
* **online**: the same, learning online after every turn (:mod:`memspec_ros.runtime.online_learning`:
  labels only for the drafts resident at the turn's end, the guard on);
* **offline (new mix)**: memspec with a predictor trained offline, the way ``memspec_build
  predictor`` trains, on traces of *other* sessions of the new mix (disjoint prompts): what the
  online learner should approach;
* **cold start**: memspec with an untrained predictor (every forecast 0.5) learning online from
  the first session;
* **oracle**: the best draft per segment in hindsight, all drafts resident (the bound).

And on the shipped mix (the catalogue's held-out prompts, sessions as ``make bench`` builds
them): shipped against online, since learning must not cost where the shipped predictor is right.

The goals (issue 42): after 10 sessions online is within 5% of the offline new-mix predictor, and
on the shipped mix no more than 2% below the shipped predictor. The simulator replays the exact
greedy traces through the same runtime and policy code with a cost model measured here
(``bench.calibration``); learning happens between turns and costs no decoding time (in the node it
runs in idle time; ``bench.learning_cost`` measures what a goal that arrives meanwhile pays).
Writes ``learning.json``, ``learning.png`` and ``learning.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import random
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from memspec_ros.runtime import Budget, DraftRuntime, RuntimeConfig, Simulator
from memspec_ros.runtime.ngram_member import NgramSettings
from memspec_ros.runtime.policies import MemSpecPolicy, OraclePolicy
from memspec_ros.runtime.predictor import DraftPredictor
from memspec_ros.runtime.predictor_training import train_predictor
from memspec_ros.runtime.traces import DialogueTrace
from memspec_ros.runtime.workload import load_chat_style, load_prompts

from .calibration import calibrate
from .config import REPO
from .inputs import display_path
from .policy_factory import PolicyFactory
from .real_runs import serve_turn
from .split import load_training_prompts
from .testbed import load_testbed
from .trace_cache import ConversationCursor, DialogueTraces, session_traces
from .workloads import ScriptedDialogue, build_workload, evaluation_pools

ARMS = ("shipped", "online", "offline-new-mix", "cold-start", "oracle")


def mixed_sessions(pools: dict[str, list[str]], domain: str, share: float, *, sessions: int, turns: int,
                   max_new_tokens: int, seed: int, prefix: str, style) -> list[ScriptedDialogue]:
    """Sessions whose turns are ``domain`` with probability ``share``, else another domain (uniformly);
    prompts are taken off ``pools`` (without replacement while a domain has any left)."""
    rng = random.Random(seed)
    others = [d for d in sorted(pools) if d != domain]
    used: dict[str, int] = dict.fromkeys(pools, 0)
    out = []
    for s in range(sessions):
        chosen = []
        for _ in range(turns):
            d = domain if rng.random() < share or not others else rng.choice(others)
            pool = pools[d]
            prompt = pool.pop() if len(pool) > 1 else pool[used[d] % len(pool)]
            used[d] += 1
            chosen.append(style.turn(prompt, max_new_tokens, d))
        out.append(ScriptedDialogue(f"{prefix}-{s}", 1, tuple(chosen), carry_context=True))
    return out


def _flat(traces: DialogueTraces) -> list[DialogueTrace]:
    return list(traces.conversations)


def serve(sim_policy, catalogue, budget: Budget, cost, config: RuntimeConfig, sessions: Sequence[DialogueTraces],
          *, learn: bool, learned_share: list[float] | None = None) -> list[float]:
    """tokens/s of each session, one simulator (one runtime, one policy) across all of them.

    ``learned_share`` (a learning arm) receives, per session, the share of its turns after which
    the policy forecast with the learned weights (the challenger had beaten the shipped ones)."""
    sim = Simulator(catalogue, budget, sim_policy, cost, config)
    if learn:
        sim.runtime.enable_learning()
    sim.warm_up()
    rates = []
    for traces in sessions:
        tokens = wall = 0.0
        served: list[bool] = []
        for conv in traces.conversations:
            res = sim.run(conv)
            tokens += res.tokens
            wall += res.wall_s
            served += [r.serving_learned for r in res.learn_reports]
        rates.append(tokens / wall if wall else 0.0)
        if learned_share is not None:
            learned_share.append(statistics.fmean(served) if served else 0.0)
    return rates


def real_rates(tb, arms: Mapping[str, tuple[object, bool]], budget: Budget, config: RuntimeConfig,
               sessions: Sequence[ScriptedDialogue], learned_share: dict[str, list[float]] | None = None
               ) -> dict[str, list[float]]:
    """The same on the real runtime: one runtime and policy per arm for all sessions (as a node).

    The arms are interleaved *turn by turn*, each in its own conversation (its own KV cache), the
    order rotating every turn: a slow spell of the machine then lands on every arm within a few
    seconds. Interleaved session by session (each arm serving a whole session in turn), the arms'
    rates on one session differed by up to 30% where the simulator, on the same traces, had them
    within a few percent. An arm that learns takes its step after each of its turns, untimed (idle
    time in the node); ``learned_share`` receives its per-session share of turns served by the
    learned weights afterwards, as :func:`serve` does.
    """
    config = dataclasses.replace(config, scheduling="inline")
    runtimes = {name: DraftRuntime(tb.engine, tb.catalogue, budget, policy, config, materialize=tb.materialize)
                for name, (policy, _) in arms.items()}
    names = list(arms)
    rates: dict[str, list[float]] = {name: [] for name in arms}
    try:
        for name, rt in runtimes.items():
            if arms[name][1]:
                rt.enable_learning()
            rt.warm_up()
        rotation = 0
        for session in sessions:
            tokens = dict.fromkeys(names, 0.0)
            wall = dict.fromkeys(names, 0.0)
            served: dict[str, list[bool]] = {name: [] for name in names}
            for turns in session.conversations:
                convs = {name: rt.new_conversation() for name, rt in runtimes.items()}
                for turn in turns:
                    rotation += 1
                    for name in names[rotation % len(names):] + names[: rotation % len(names)]:
                        report = serve_turn(runtimes[name], convs[name], turn)
                        tokens[name] += report.tokens
                        wall[name] += report.wall_s
                        learned = runtimes[name].learn_from_last_turn() if arms[name][1] else None
                        if learned is not None:
                            served[name].append(learned.serving_learned)
            for name in names:
                rates[name].append(tokens[name] / wall[name] if wall[name] else 0.0)
                if learned_share is not None and served[name]:
                    learned_share.setdefault(name, []).append(statistics.fmean(served[name]))
    finally:
        for rt in runtimes.values():
            rt.close()
    return rates


def paired_interval(numerator: Sequence[float], denominator: Sequence[float], *, draws: int = 2000,
                    seed: int = 0) -> tuple[float, float]:
    """A 95% bootstrap interval of ``mean(numerator) / mean(denominator)`` over paired sessions.

    A real run's ratio over ten sessions moves by several percent from one run to the next (the
    sessions differ, the machine drifts); the interval says how far a goal's margin can be read.
    """
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(num), size=(draws, len(num)))
    ratios = num[picks].mean(axis=1) / den[picks].mean(axis=1)
    low, high = np.quantile(ratios, [0.025, 0.975])
    return float(low), float(high)


def oracle_rates(catalogue, cost, config, sessions: Sequence[DialogueTraces]) -> list[float]:
    """The oracle, session by session (it needs each session's trace; it learns nothing to carry)."""
    rates = []
    for traces in sessions:
        cursor = ConversationCursor(traces)
        sim = Simulator(catalogue, Budget.unlimited(), OraclePolicy(cursor), cost, config)
        sim.warm_up()
        tokens = wall = 0.0
        for i, conv in enumerate(traces.conversations):
            cursor.index = i
            res = sim.run(conv)
            tokens += res.tokens
            wall += res.wall_s
        rates.append(tokens / wall if wall else 0.0)
    return rates


def untrained(shipped: DraftPredictor) -> DraftPredictor:
    """A predictor that knows nothing: zero weights and biases (every forecast 0.5), the shipped
    feature statistics (standardisation is not learning)."""
    return DraftPredictor(shipped.draft_names, shipped.hidden_size, np.zeros_like(shipped.weight),
                          np.zeros_like(shipped.bias), shipped.mean, shipped.std, buckets=shipped.buckets)


def default_domain(prompts: Mapping[str, object]) -> str:
    """The domain the shifted mix favours when ``--mix`` is not given: ``code`` (a robot whose users
    mostly ask for code) where the catalogue has it, else its first specialised domain, so
    ``make bench CATALOGUE=...`` runs the experiment on any model set."""
    specialised = sorted(d for d in prompts if d not in ("general", "mixed")) or sorted(prompts)
    return "code" if "code" in prompts else specialised[0]


def run(args: argparse.Namespace) -> Path:
    t0 = time.perf_counter()
    out = args.out or REPO / "results" / f"learning-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    tb = load_testbed(args.catalogue, args.threads or None, args.dtype)
    prompts_file = args.catalogue.parent / "heldout" / "prompts.jsonl" if args.catalogue.is_file() else \
        args.catalogue / "heldout" / "prompts.jsonl"
    prompts = load_prompts(prompts_file)
    style = load_chat_style(prompts_file)
    training = load_training_prompts(tb.predictor_path)
    domain, share = args.mix or (default_domain(prompts), 0.7)
    if domain not in prompts:
        raise SystemExit(f"--mix domain {domain!r} has no held-out prompts (domains: {sorted(prompts)})")
    pools, _ = evaluation_pools(prompts, training, args.seed)
    serving = mixed_sessions(pools, domain, share, sessions=args.sessions, turns=args.turns,
                             max_new_tokens=args.max_new_tokens, seed=args.seed, prefix="shift", style=style)
    offline = mixed_sessions(pools, domain, share, sessions=args.train_sessions, turns=args.turns,
                             max_new_tokens=args.max_new_tokens, seed=args.seed + 1, prefix="shift-train",
                             style=style)
    shipped_mix = build_workload(prompts, exclude=training, sessions=args.sessions, turns=args.turns,
                                 max_new_tokens=args.max_new_tokens, seed=args.seed + 2, style=style)
    cache = REPO / ".cache" / "bench-traces"
    log = lambda msg: print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    log(f"{len(serving)} sessions of the new mix ({domain} {share:.0%}), {len(offline)} to train a predictor on it, "
        f"{len(shipped_mix.sessions)} of the shipped mix; recording traces")
    serve_tr = session_traces(tb, serving, cache, args.k)
    train_tr = session_traces(tb, offline, cache, args.k)
    ship_tr = session_traces(tb, shipped_mix.sessions, cache, args.k)
    factory = PolicyFactory(tb.predictor_path, tb.catalogue.names, seed=args.seed)
    budget = Budget.drafts(args.budget)
    cal = calibrate(tb, shipped_mix.calibration, ship_tr[0], ratio=2.7, budget=budget, k=args.k,
                    check_interval=4, repeats=5, factory=factory)
    cost = cal.cost
    config = RuntimeConfig(k=args.k, check_interval=4, storage=cal.storage, ngram=NgramSettings(),
                           scheduling="inline")
    shipped = DraftPredictor.load(tb.predictor_path, tb.catalogue.names)
    offline_pred, metrics = train_predictor([c for tr in train_tr for c in _flat(tr)], tb.catalogue.names,
                                            shipped.hidden_size, k=args.k)
    log(f"calibrated (round {cal.round_s * 1e3:.1f} ms); offline new-mix predictor trained on "
        f"{metrics['train'].examples} examples; simulating")
    sim_learned: dict[str, list[float]] = {"online": [], "cold-start": []}
    new_mix: dict[str, list[float]] = {
        "shipped": serve(MemSpecPolicy(copy.deepcopy(shipped)), tb.catalogue, budget, cost, config, serve_tr,
                         learn=False),
        "online": serve(MemSpecPolicy(copy.deepcopy(shipped)), tb.catalogue, budget, cost, config, serve_tr,
                        learn=True, learned_share=sim_learned["online"]),
        "offline-new-mix": serve(MemSpecPolicy(copy.deepcopy(offline_pred)), tb.catalogue, budget, cost, config,
                                 serve_tr,
                                 learn=False),
        "cold-start": serve(MemSpecPolicy(untrained(shipped)), tb.catalogue, budget, cost, config, serve_tr,
                            learn=True, learned_share=sim_learned["cold-start"]),
        "oracle": oracle_rates(tb.catalogue, cost, config, serve_tr),
    }
    real_new: dict[str, list[float]] = {}
    real_learned: dict[str, list[float]] = {}
    if args.real:
        log("real runs on the new mix (shipped, online, offline new-mix, cold start; interleaved)")
        real_new = real_rates(tb, {"shipped": (MemSpecPolicy(copy.deepcopy(shipped)), False),
                                   "online": (MemSpecPolicy(copy.deepcopy(shipped)), True),
                                   "offline-new-mix": (MemSpecPolicy(copy.deepcopy(offline_pred)), False),
                                   "cold-start": (MemSpecPolicy(untrained(shipped)), True)},
                              budget, config, serving, learned_share=real_learned)
    old_mix = {
        "shipped": serve(MemSpecPolicy(copy.deepcopy(shipped)), tb.catalogue, budget, cost, config, ship_tr,
                         learn=False),
        "online": serve(MemSpecPolicy(copy.deepcopy(shipped)), tb.catalogue, budget, cost, config, ship_tr,
                        learn=True),
    }
    after = args.after
    results = {
        "config": {"catalogue": display_path(args.catalogue), "mix": {"domain": domain, "share": share},
                   "sessions": args.sessions, "turns": args.turns, "max_new_tokens": args.max_new_tokens,
                   "train_sessions": args.train_sessions, "budget_drafts": args.budget, "k": args.k,
                   "threads": tb.threads, "dtype": tb.dtype_note, "seed": args.seed, "after_sessions": after,
                   "round_ms": cal.round_s * 1e3,
                   "command": " ".join(["python -m bench.learning_shift", *sys.argv[1:]])},
        "new_mix": new_mix, "shipped_mix": old_mix, "real_new_mix": real_new,
        "summary": summarize(new_mix, old_mix, after),
        "learned_share": {"simulated": sim_learned, "real": real_learned},
    }
    if real_new:
        results["real_summary"] = real_summary(real_new, after)
    (out / "learning.json").write_text(json.dumps(results, indent=1))
    plot(results, out / "learning.png")
    (out / "learning.md").write_text(report(results))
    log(f"done: {out}")
    return out


def _judged(rates: Sequence[float], after: int) -> Sequence[float]:
    """The sessions a goal is judged on: those after the first ``after`` (the last, if none are)."""
    return rates[after:] or rates[-1:]


def _mean_after(rates: Sequence[float], after: int) -> float:
    return statistics.fmean(_judged(rates, after))


def real_summary(real: Mapping[str, Sequence[float]], after: int) -> dict[str, float | list[float]]:
    """The real runs' ratios on the sessions after ``after``, each with its bootstrap interval."""
    out: dict[str, float | list[float]] = {}
    for key, num, den in (("online_vs_offline_new_mix", "online", "offline-new-mix"),
                          ("online_vs_shipped_new_mix", "online", "shipped"),
                          ("cold_vs_offline_new_mix", "cold-start", "offline-new-mix"),
                          ("offline_vs_shipped_new_mix", "offline-new-mix", "shipped")):
        a, b = _judged(real[num], after), _judged(real[den], after)
        out[key] = statistics.fmean(a) / statistics.fmean(b)
        out[key + "_interval"] = list(paired_interval(a, b))
    return out


def summarize(new_mix: Mapping[str, Sequence[float]], old_mix: Mapping[str, Sequence[float]], after: int
              ) -> dict[str, float]:
    """The two goals, on the sessions after the first ``after``."""
    online = _mean_after(new_mix["online"], after)
    offline = _mean_after(new_mix["offline-new-mix"], after)
    return {"online_vs_offline_new_mix": online / offline,
            "online_vs_shipped_new_mix": online / _mean_after(new_mix["shipped"], after),
            "cold_vs_offline_new_mix": _mean_after(new_mix["cold-start"], after) / offline,
            "online_vs_oracle_new_mix": online / _mean_after(new_mix["oracle"], after),
            "online_vs_shipped_on_shipped_mix": statistics.fmean(old_mix["online"]) / statistics.fmean(
                old_mix["shipped"])}


def plot(results: Mapping, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for name, rates in results["new_mix"].items():
        axes[0].plot(range(1, len(rates) + 1), rates, marker="o", label=name)
    mix = results["config"]["mix"]
    axes[0].set_title(f"serving a new mix ({mix['domain']} {mix['share']:.0%})")
    for name, rates in results["shipped_mix"].items():
        axes[1].plot(range(1, len(rates) + 1), rates, marker="o", label=name)
    axes[1].set_title("serving the shipped mix")
    for ax in axes:
        ax.set_xlabel("session (one runtime and policy through all of them)")
        ax.set_ylabel("tokens/s (simulated on exact traces)")
        ax.legend()
        ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _table(rates_by_name: Mapping[str, Sequence[float]], sessions: int, after: int) -> list[str]:
    head = " | ".join(f"s{i + 1}" for i in range(sessions))
    rows = [f"| configuration | {head} | mean after {after} |", "|---|" + "---|" * (sessions + 1)]
    for name, rates in rates_by_name.items():
        cells = " | ".join(f"{r:.1f}" for r in rates)
        rows.append(f"| {name} | {cells} | {_mean_after(rates, after):.1f} |")
    return rows


def report(results: Mapping) -> str:
    c, s = results["config"], results["summary"]
    n, after = c["sessions"], c["after_sessions"]
    real = []
    if results.get("real_new_mix"):
        rs = results["real_summary"]
        sim_offline = _mean_after(results["new_mix"]["offline-new-mix"], after) / _mean_after(
            results["new_mix"]["shipped"], after)
        ci = lambda key: "[{:.3f}, {:.3f}]".format(*rs[key + "_interval"]) if key + "_interval" in rs else "-"  # noqa: E731
        real = ["Real runs on the new mix (the same sessions, one real runtime per configuration, interleaved "
                "turn by turn, each in its own conversation; learning untimed between turns). Ratios on the "
                f"sessions after {after}, with a 95% bootstrap interval over those sessions:", "",
                *_table(results["real_new_mix"], n, after), "",
                f"- real: online / offline new-mix **{rs['online_vs_offline_new_mix']:.3f}** "
                f"{ci('online_vs_offline_new_mix')}, online / shipped {rs['online_vs_shipped_new_mix']:.3f} "
                f"{ci('online_vs_shipped_new_mix')}, cold start / offline {rs['cold_vs_offline_new_mix']:.3f} "
                f"{ci('cold_vs_offline_new_mix')}; offline new-mix / shipped "
                f"{rs.get('offline_vs_shipped_new_mix', float('nan')):.3f} {ci('offline_vs_shipped_new_mix')} "
                f"(the simulation's: {sim_offline:.3f})", ""]
    shipped_mix = {f"{name} (shipped mix)": rates for name, rates in results["shipped_mix"].items()}
    return "\n".join([
        "# Online learning: a shifted mix and a cold start (simulated on exact traces)", "",
        f"`{c['command']}`: catalogue {c['catalogue']}, {n} sessions of {c['turns']} turns x "
        f"{c['max_new_tokens']} tokens, new mix {c['mix']['domain']} {c['mix']['share']:.0%}, the offline new-mix "
        f"predictor trained on {c['train_sessions']} other sessions of it; budget {c['budget_drafts']} drafts, "
        f"k={c['k']}, {c['threads']} thread(s), {c['dtype']}, round {c['round_ms']:.1f} ms; tokens/s per session "
        "(the shipped-mix rows: the mean over all sessions in the last column):", "",
        *_table(results["new_mix"], n, after), *_table(shipped_mix, n, 0)[2:], "",
        f"- online / offline new-mix predictor, sessions after {after}: "
        f"**{s['online_vs_offline_new_mix']:.3f}** (goal >= 0.95)",
        f"- online / shipped on the shipped mix: **{s['online_vs_shipped_on_shipped_mix']:.3f}** (goal >= 0.98)",
        f"- online / shipped on the new mix: {s['online_vs_shipped_new_mix']:.3f}; cold start / offline: "
        f"{s['cold_vs_offline_new_mix']:.3f}; online / oracle: {s['online_vs_oracle_new_mix']:.3f}", "",
        "The oracle has every model draft resident and the best one per 4-round segment in hindsight, but no "
        "n-gram member and no draftless rounds: where no model draft matches the target (the zoo's long code "
        "sessions loop, which prompt lookup matches), it drafts anyway and memspec passes it.", "",
        *real, *_learned_lines(results), "![learning](learning.png)", ""])


def _learned_lines(results: Mapping) -> list[str]:
    """How often the learning arms served their learned weights: a real/simulated gap in the
    ratios with the same promotions is the machine's; with other promotions it is the learner's."""
    shares = results.get("learned_share") or {}
    after = results["config"]["after_sessions"]
    parts = []
    for arm in ("online", "cold-start"):
        sim, real = shares.get("simulated", {}).get(arm), shares.get("real", {}).get(arm)
        if not sim:
            continue
        text = f"{arm} {_mean_after(sim, after):.0%} simulated"
        if real:
            text += f", {_mean_after(real, after):.0%} real"
        parts.append(text)
    if not parts:
        return []
    return [f"Turns after which the learning arms served their learned weights (the challenger ahead of the "
            f"shipped ones), sessions after {after}: " + "; ".join(parts) + ".", ""]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--catalogue", type=Path, default=REPO / "models" / "smollm2",
                    help="catalogue file or folder (default: the default model set; models/zoo records its "
                         "traces in seconds)")
    ap.add_argument("--mix", type=lambda v: (v.split("=")[0], float(v.split("=")[1])), default=None,
                    help="the new mix: DOMAIN=SHARE (default code=0.7, or the catalogue's first specialised "
                         "domain at 0.7 where it has no code domain)")
    ap.add_argument("--sessions", type=int, default=20,
                    help="sessions served per configuration (the goals are judged on those after --after)")
    ap.add_argument("--train-sessions", type=int, default=14)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--after", type=int, default=10, help="the goals are judged on the sessions after this many")
    ap.add_argument("--budget", type=int, default=2)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--real", action="store_true", help="also serve the new mix for real (4 configurations)")
    print(run(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
