"""The generated markdown report: configuration, the targets' verdicts, every experiment.

Written from the results document alone (like the plots), so it always matches the JSON next
to it. Every number in it is measured in the run that wrote it; the verdicts and their
explanations come from :mod:`bench.targets`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from memspec_ros.core.greedy_ties import TIE_STEPS
from memspec_ros.runtime import ADAPTIVE_BASELINES

from .plots import SWEEP_PLOTS, ordered_names

Results = Mapping[str, Any]


def _f(x: object, fmt: str = ".1f", none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows)]


def _config_section(r: Results) -> list[str]:
    c = r["config"]
    m = c["models"]
    drafts = ", ".join(f"{n} ({d['domain']}, {d['bytes'] / 1e6:.2f} MB)" for n, d in m["drafts"].items())
    w = c["workload"]
    env = c.get("environment", {})
    rows = [
        ("catalogue", _catalogue_line(c)),
        ("target", f"{m['target']['path']} ({m['target']['bytes'] / 1e6:.1f} MB on disk)"),
        ("drafts", drafts),
        ("speculation length k", str(c["k"]) + (f" ({c['speculation_chosen_by']})" if "speculation_chosen_by" in c
                                                 else " (--k)")),
        ("memory budget", f"{c['budget_drafts']} drafts = {c['budget_bytes'] / 1e6:.2f} MB (the largest drafts' "
                          "in-memory footprint: weights in the compute dtype, rotary tables, full-context KV cache)"),
        ("check interval", f"{c['check_interval']} rounds" + (" (auto, above)" if "speculation_chosen_by" in c
                                                               else " (--check-interval)")),
        ("emulated storage bandwidth", f"{c['emulated_bandwidth_bytes_per_s'] / 1e6:.2f} MB/s"),
        ("load/round ratio", f"requested {c['requested_load_round_ratio']}, measured "
                             f"{c['measured_load_round_ratio']:.2f} (mean real load {c['mean_load_s'] * 1e3:.1f} ms "
                             f"/ mean real round {c['round_s'] * 1e3:.1f} ms); per-run runtime statistics: "
                             f"{_f(c.get('runs_load_round_ratio'), '.2f')}"),
        ("decoding threads", f"{c['threads']} torch thread(s), chosen by {c.get('threads_chosen_by', '--threads')}; "
                             "loader on its own thread"),
        ("workload", f"{len(w['sessions'])} sessions x {c['bench']['turns']} turns x {c['bench']['max_new_tokens']} "
                     f"new tokens max, topic shift every {'/'.join(map(str, c['bench']['shift_rates']))} turns, "
                     + ("one conversation per session" if w.get("carry_context") else
                        "a new conversation at each topic shift (context kept within a topic)")
                     + f", seed {c['bench']['seed']}"),
        ("CPU-bound neighbours", f"{c['bench'].get('cpu_neighbours', 0)} busy process(es) beside the whole run"
                                 + (" (a robot computer's other nodes)" if c['bench'].get('cpu_neighbours') else "")),
        ("compute dtype", f"{c.get('dtype', 'float32')} ({c.get('dtype_chosen_by', '--dtype')}); every output is "
                          "lossless relative to the target in this dtype"),
        ("hf-prompt-lookup", "transformers generate(prompt_lookup_num_tokens="
                             f"{(c.get('hf_prompt_lookup') or {}).get('prompt_lookup_num_tokens', c['k'])}), greedy, "
                             "no draft model"),
        ("hf-assisted", f"transformers generate(assistant_model={c['hf_assisted']['draft']}), "
                        f"num_assistant_tokens={c['k']} (constant), greedy; hf-assisted-heuristic: the same with "
                        f"transformers' heuristic schedule from {c['k']} (+2 after a fully accepted round, -1 "
                        "otherwise)"),
        ("machine", f"{env.get('cpu', '?')}, {env.get('cores', '?')} cores, torch {env.get('torch')}, "
                    f"transformers {env.get('transformers')}, python {env.get('python')}; 1-min load average "
                    + (", ".join(f"{v:.2f} ({k})" for k, v in (env.get("load_average_1min") or {}).items()) or "-")),
        ("run", f"{c['mode']} preset, {c['created']}, {_f(r.get('runtime_s', {}).get('total'), '.0f')} s"),
    ]
    return ["## Configuration", "", *_table(("", ""), rows), "",
            "## Reproduce", "", "```sh", f"{c['commands']['make']}   # or: {c['commands']['python']}", "```", ""]


def _catalogue_line(c: Mapping[str, Any]) -> str:
    """The measured model set and its prompts (results before 2026-12 lack the entry: the bundled zoo)."""
    cat = c.get("catalogue")
    if not cat:
        return "models/zoo/catalogue.yaml (the bundled zoo); prompts models/heldout/prompts.jsonl"
    what = {"smollm2": " (the default model set: SmolLM2-135M-Instruct)", "zoo": " (the bundled 17 M zoo)"}.get(
        cat.get("model_set") or "", "") if cat.get("model_set") or cat.get("bundled") else ""
    return (f"{cat['path']}{what}; evaluation prompts {cat['prompts']}; every session opens in domain "
            f"{cat.get('home_domain', '?')}")


def _targets_section(r: Results) -> list[str]:
    rows, why = [], []
    reference = any(t.get("scope") == "reference" for t in r["targets"])
    for t in r["targets"]:
        verdict = "n/a" if t["holds"] is None else ("**holds**" if t["holds"] else "**missed**")
        if t.get("scope") == "reference" and t["holds"] is not None:
            verdict = "met" if t["holds"] else "below"
        op = ">" if t["reference"].startswith("hf-assisted") else ">="
        miss = "" if not t["shortfall"] else f"short by {t['shortfall']:.2f}x ({t['shortfall'] / t['required']:.0%})"
        rows.append((f"memspec vs {t['target']} ({t['reference']})", f"{op} {t['required']:.2f}x",
                     _f(t["ratio"], ".2f") + "x", verdict, miss))
        why.append(f"- **vs {t['target']}** ({_f(t['ratio'], '.2f')}x): {t['why']}")
    if reference:
        head = ["## Your model set against the project's targets (experiment 1, real runs)", "",
                "These are the targets this project sets itself for its bundled default model set "
                "(SmolLM2-135M-Instruct with its drafts), shown for reference: they are not requirements of your "
                "model set, and 'below' is not a failure of your run. What decides whether your drafts pay is the "
                "headline table's 'vs target-only' column.", ""]
    else:
        head = ["## Targets (experiment 1, real runs)", ""]
    return [*head, *_table(("target", "required", "measured", "verdict", "shortfall"), rows), "", *why, "",
            *_oracle_granularity(r)]


def _oracle_granularity(r: Results) -> list[str]:
    og = r["experiments"].get("oracle_granularity") or {}
    if not og.get("segment_rounds"):
        return []
    ms = og.get("memspec_sim_tokens_per_s")
    cells = [f"{n} round{'s' if n > 1 else ''}: {t:.1f} tok/s" + (f" (memspec {ms / t:.2f}x)" if ms else "")
             for n, t in zip(og["segment_rounds"], og["oracle_sim_tokens_per_s"], strict=True)]
    return ["The oracle knows the best draft per segment of 4 rounds (the check interval a forecast is made "
            "for). How much the granularity of its hindsight matters, simulated on the same traces and time model "
            f"as memspec, simulated at {_f(ms)} tok/s: " + "; ".join(cells) + ". Per-round hindsight "
            "switches drafts within a segment, which no forecaster can do.", ""]


def _headline_section(r: Results) -> list[str]:
    pol = r["policies"]
    base = pol.get("target-only", {}).get("tokens_per_s")
    ms = pol.get("memspec", {}).get("tokens_per_s")
    rows = []
    for n in ordered_names(list(pol)):
        p = pol[n]
        rows.append((n, f"{p['tokens_per_s']:.1f}", f"±{p.get('tokens_per_s_std', 0):.1f}",
                     f"{p['tokens_per_s'] / base:.2f}x" if base else "-",
                     f"{ms / p['tokens_per_s']:.2f}x" if ms and p["tokens_per_s"] else "-",
                     _f(p["acceptance_rate"], ".2f"), _f(p["mean_accepted_length"], ".2f"), f"{p['stall_s']:.2f}",
                     str(p["switches"]), str(p["loads"]), f"{p['peak_memory_bytes'] / 1e6:.2f}",
                     _f(p.get("load_round_ratio"), ".2f"), _f(p.get("target_only_round_fraction"), ".0%"),
                     _f(p.get("ngram_round_fraction"), ".0%"),
                     _output_cell(p)))
    return ["## Experiment 1: headline (real runs, every configuration side by side)", "",
            *_table(("configuration", "tok/s", "sd over sessions", "vs target-only", "memspec is", "acceptance",
                     "tokens/round", "stall s", "switches", "loads", "peak draft MB", "load/round",
                     "draftless rounds", "n-gram rounds", "output = target's"), rows), "",
            "tok/s: all tokens / all seconds over the sessions (prefill, stalls, scheduling and predictor time "
            "included); sd: standard deviation of the per-session rates; acceptance and tokens/round of "
            "hf-assisted are those of its draft's k-token rounds on the exact trace; peak draft MB: most draft "
            "bytes loading or resident at once (in-memory footprints); load/round: the runtime's own measurement "
            "in that configuration's runs (mean load over mean round). Output = target's: every turn compared with "
            "the exact trace of the target's greedy output; in bfloat16 a turn may first depart from it where two "
            f"tokens tie within {TIE_STEPS[torch.bfloat16]} bf16 steps of the target's logits (scored again there; "
            "twice the largest "
            "difference between batchings measured, memspec_ros/core/greedy_ties.py), which the verification "
            "pass and a one-token step may break differently: 'yes up to N ties' with the largest tie's margin in "
            "logits; NO gives the smallest margin of a departure that was not a tie (bench/output_check.py). "
            "llama.cpp runs the original 4-bit GGUF with "
            "its own kernels, so its output cannot be the target's token for token: its column gives the share of "
            "the target's tokens it reproduced, each turn up to its first difference.", "",
            "Draftless rounds: rounds in which nothing proposed (a target-only step: the policy's choice, the "
            "guard's, or an n-gram lookup that found no match); n-gram rounds: rounds the n-gram member proposed in "
            "(every runtime configuration runs with the member on, the node's default; memspec, ucb-resident and "
            "ngram-only choose it).", "",
            *_ngram_line(r), *_llama_cpp_line(r), *_guard_line(r), "",
            "![tokens/s](headline.png)", "", "![per-policy figures](metrics.png)", "",
            "![residency timeline](timeline.png)", ""]


def _output_cell(p: Mapping[str, Any]) -> str:
    """yes / yes up to N ties (low precision) / NO (N turns) / the agreement of a peer that cannot be exact."""
    if p.get("output_agreement") is not None:
        return f"{p['output_agreement']:.0%} agree"
    if p.get("output_mismatches"):
        margin = p.get("smallest_mismatch")
        return f"NO ({p['output_mismatches']} turn(s)" + (f", margin {margin:.3g}" if margin is not None else "") + ")"
    if p.get("output_ties"):
        return f"yes up to {p['output_ties']} tie(s) (<= {p.get('largest_tie', 0.0):.3g})"
    return {True: "yes", False: "NO", None: "-"}[p.get("outputs_identical")]


def _ngram_line(r: Results) -> list[str]:
    """memspec with and without the n-gram member, side by side (docs/runtime.md, 'The n-gram member')."""
    pol = r["policies"]
    on, off = pol.get("memspec"), pol.get("memspec-no-ngram")
    if not on or not off or not off.get("tokens_per_s"):
        return []
    only = pol.get("ngram-only")
    return [f"The n-gram member: memspec {on['tokens_per_s']:.1f} tok/s with it, {off['tokens_per_s']:.1f} without "
            f"({on['tokens_per_s'] / off['tokens_per_s']:.2f}x); draftless rounds "
            f"{_f(on.get('target_only_round_fraction'), '.0%')} with it, "
            f"{_f(off.get('target_only_round_fraction'), '.0%')} without; it proposed in "
            f"{_f(on.get('ngram_round_fraction'), '.0%')} of memspec's rounds"
            + (f"; alone (ngram-only) {only['tokens_per_s']:.1f} tok/s" if only else "") + ".", ""]


def _guard_line(r: Results) -> list[str]:
    """The do-no-harm guard's fallbacks, by policy (docs/runtime.md, 'Do no harm')."""
    cells = [f"{n}: {p['guard_fallbacks']} fallback(s), {p['guard_fallback_round_fraction']:.0%} of its rounds "
             "target-only in fallback" for n, p in r["policies"].items()
             if p.get("guard_fallbacks") and p.get("guard_fallback_round_fraction") is not None]
    if not cells:
        guarded = [n for n in r["policies"] if n.startswith("memspec") and n != "memspec-predict-only"]
        return [f"Do-no-harm guard ({', '.join(guarded)}): no fallback in this run (drafting measured faster than "
                "target-only throughout)."] if guarded else []
    return ["Do-no-harm guard: drafting measured slower than target-only decoding, so the guard fell back to "
            "target-only rounds without loads, probing again with a growing wait: " + "; ".join(cells) + "."]


def _llama_cpp_line(r: Results) -> list[str]:
    info = r["config"].get("llama_cpp") or {}
    if not info:
        return []
    if "note" in info:
        return [f"llama.cpp (llama-cpp-python): {info['note']}."]
    return [f"llama.cpp: llama-cpp-python {info.get('version')}, {info.get('gguf')}, {info.get('threads')} thread(s); "
            f"llama-cpp-prompt-lookup: LlamaPromptLookupDecoding(num_pred_tokens={info.get('prompt_lookup_tokens')})."]


def _ablation_section(r: Results) -> list[str]:
    ab = r["experiments"].get("ablation") or {}
    by_rate = ab.get("tokens_per_s_by_shift_rate") or {}
    if not by_rate:
        return []
    names = list(next(iter(by_rate.values())))
    rows = [(n, *(f"{by_rate[g].get(n, 0):.1f}" for g in by_rate), f"{r['policies'][n]['tokens_per_s']:.1f}",
             _f(r["policies"][n]["acceptance_rate"], ".2f"), f"{r['policies'][n]['stall_s']:.2f}",
             str(r["policies"][n]["loads"])) for n in names]
    return ["## Experiment 2: ablation (the same real runs)", "",
            *_table(("policy", *(f"shift every {g} (tok/s)" for g in by_rate), "all (tok/s)", "acceptance",
                     "stall s", "loads"), rows), "", "![ablation](ablation.png)", ""]


def _sweeps_section(r: Results) -> list[str]:
    out = ["## Experiments 3-6: sweeps (simulator, same policy code, exact traces)", ""]
    for key, title, xlabel, png, _ in SWEEP_PLOTS:
        sw = r["experiments"].get(key)
        if not sw:
            continue
        labels = sw.get("labels") or [str(v) for v in sw["values"]]
        rows = [(n, *(_f(v) for v in sw["policies"][n]["tokens_per_s"])) for n in ordered_names(list(sw["policies"]))]
        if sw.get("target-only"):
            rows.append(("target-only (modelled)", *(_f(v) for v in sw["target-only"])))
        ms, best = sw["policies"].get("memspec"), None
        notes = []
        if ms:
            adaptive = [n for n in ADAPTIVE_BASELINES if n in sw["policies"]]
            ratios = []
            for i in range(len(labels)):
                best = max(adaptive, key=lambda n, i=i: sw["policies"][n]["tokens_per_s"][i]) if adaptive else None
                if best and sw["policies"][best]["tokens_per_s"][i]:
                    ratios.append(f"{labels[i]}: {ms['tokens_per_s'][i] / sw['policies'][best]['tokens_per_s'][i]:.2f}x"
                                  f" ({best})")
            if ratios:
                notes = ["memspec / best adaptive baseline: " + ", ".join(ratios), ""]
        out += [f"### {title}", "", f"tokens/s by {xlabel}:", "", *_table(("policy", *labels), rows), "", *notes,
                f"![{key}]({png})", ""]
    return out


def _worst(entry: dict[str, Any] | None) -> str:
    return f"{entry['policy']} {entry['error']:+.1%}" if entry and entry.get("policy") else "-"


def _thread_section(r: Results) -> list[str]:
    ts = r.get("thread_settings") or {}
    settings = ts.get("settings") or []
    if len(settings) < 2 and not ts.get("auto"):
        return []
    auto = ""
    if ts.get("auto_round_ms"):
        timed = sorted(ts["auto_round_ms"].items(), key=lambda x: int(x[0]))
        cells = ", ".join(f"{t} -> {ms:.1f} ms" for t, ms in timed)
        auto = (f"The headline ran the node's default, `num_threads: 0` (auto): timing speculative rounds at each "
                f"count ({cells} median) chose {ts['headline_threads']} thread(s), as a node's configure would on "
                "this machine. ")
    rows = []
    for st in settings:
        tps, vs, worst = st["tokens_per_s"], st["memspec_vs"], st["simulator_worst"]
        rows.append((f"{st['threads']}{' (headline)' if st['threads'] == ts['headline_threads'] else ''}",
                     _f(st.get("round_ms")), _f(tps.get("memspec")), _f(tps.get("target-only")), _f(tps.get("oracle")),
                     f"{_f(vs.get('target-only'), '.2f')}x", f"{_f(vs.get('oracle'), '.2f')}x",
                     f"{_f(vs.get('best_adaptive'), '.2f')}x ({st.get('best_adaptive_baseline') or '-'})",
                     _f(st.get("load_round_ratio"), ".2f"),
                     "yes" if st.get("outputs_identical") else ("up to ties" if st.get("outputs_lossless") else "NO"),
                     _worst(worst), "holds" if worst.get("within_tolerance") else "**missed**",
                     _worst(st.get("simulator_worst_at_probe_speed"))))
    fastest, chosen = ts.get("fastest_measured"), ts.get("headline_threads")
    who = "auto chose" if ts.get("auto") else f"--threads {chosen} set"
    if len(settings) < 2:
        others = ("No other count was measured in this run (`--beside-threads`; the full preset measures every "
                  "count auto considers).")
        verdict = ""
    else:
        others = ("Every other count was measured the same way in this run: each with its own cost-model "
                  "calibration and the headline's emulated storage (so the load/round ratio moves with the round "
                  "time), real runs of every configuration on the same sessions, and their simulation.")
        verdict = ("" if fastest is None else f"The count {who} was also the fastest measured for memspec."
                   if fastest == chosen else f"memspec was fastest at {fastest} thread(s) in these runs, not at the "
                   f"count {who}.")
    tol = ts.get("tolerance", 0.06)
    return ["## Thread settings (experiment 1 at every thread count, side by side)", "", auto + others, "",
            *_table(("threads", "round ms", "memspec tok/s", "target-only", "oracle", "memspec/target-only",
                     "memspec/oracle", "memspec/best adaptive", "load/round", "output = target's",
                     "simulator worst error", f"sim within {tol:.0%}", "worst at probe speed"), rows),
            "", *([verdict, ""] if verdict else [])]


def _simulator_section(r: Results) -> list[str]:
    sv = r.get("simulator_validation") or {}
    if not sv:
        return []
    rows = [(n, f"{v['real_tokens_per_s']:.1f}", f"{v['sim_tokens_per_s']:.1f}", f"{v['error']:+.1%}",
             "-" if v.get("error_at_probe_speed") is None else f"{v['error_at_probe_speed']:+.1%}",
             f"{v.get('real_stall_s', 0):.2f}", f"{v.get('sim_stall_s', 0):.2f}") for n, v in sv.items()]
    errs = [abs(v["error"]) for v in sv.values() if v["error"] is not None]
    worst = max(sv, key=lambda n: abs(sv[n]["error"] or 0))
    signed = [v["error"] for v in sv.values() if v["error"] is not None]
    mean = sum(signed) / len(signed)
    sd = (sum((e - mean) ** 2 for e in signed) / len(signed)) ** 0.5
    note = (f" Signed errors average {mean:+.1%} with a spread of {sd:.1%} across configurations"
            + (": mostly one common offset between the time model and this run, which cancels in the ratios "
               "between policies." if sd < abs(mean) / 2 else "."))
    ref = next((t["reference"] for t in r.get("targets", []) if t["target"] == "best adaptive baseline"), None)
    if ref in sv and "memspec" in sv:
        real_ratio = sv["memspec"]["real_tokens_per_s"] / sv[ref]["real_tokens_per_s"]
        sim_ratio = sv["memspec"]["sim_tokens_per_s"] / sv[ref]["sim_tokens_per_s"]
        note += f" The headline ratio memspec / {ref} is {real_ratio:.2f}x real and {sim_ratio:.2f}x simulated."
    cal = r.get("calibration") or {}
    speeds = cal.get("block_speeds") or []
    own = [x for v in (cal.get("run_speeds") or {}).values() for x in v]
    if own:
        note += (" The machine's speed moves during a run by more than the simulator's tolerance, so every run is "
                 "simulated at its own speed: how much slower than the cost model its own target verifications ran "
                 f"outside loads ({min(own):.2f}-{max(own):.2f}x the calibration's here; bench/drift.py). A target "
                 "forward is the yardstick because every configuration runs them and no policy chooses their cost; "
                 "everything a policy decides - which drafts, how many rounds and proposals, draft time, stalls, "
                 "loads and their slowdown, overheads - is the simulator's. For target-only decoding that leaves "
                 "only prefill and per-step overhead to check.")
    if speeds:
        note += (" The column 'error at probe speed' simulates each run instead at the median of plain target "
                 "steps probed between the runs of its session block (bench/speed_probe.py; "
                 f"{min(speeds):.2f}-{max(speeds):.2f}x here): a probe of a third of a second misses slow spells "
                 "of a few seconds inside a run.")
    drift = cal.get("drift")
    if drift:
        drafts = ", ".join(f"{d} {x:.2f}x" for d, x in drift["drafts"].items())
        note += (f" At the runs' own speed, the runtime's real rounds took {drift['overall']:.3f}x the calibrated "
                 f"compute time (verification {drift['verify']:.3f}x; drafts {drafts}; rounds while a draft was "
                 f"loading a further {drift.get('loading', 1.0):.3f}x): what running inside the runtime costs beyond "
                 "isolated steps, pooled over every policy's rounds and charged to every policy's simulation "
                 f"(bench/drift.py). Time outside rounds (prefill, bookkeeping, ticks, the predictor) took "
                 f"{drift.get('other', 1.0):.3f}x what the same runs simulate to at their speed: draft steps slow "
                 "the target's verifications (the models take turns in the CPU caches), not the Python "
                 "bookkeeping. Target-only decoding runs none of the runtime and is charged none of it.")
    pol = r["policies"]
    background = [n for n in sv if n in pol and pol[n]["loads"] and not pol[n]["stall_s"]]
    bg = [sv[n]["error"] for n in background if sv[n]["error"] is not None]
    rest = [sv[n]["error"] for n in sv if n not in background and sv[n]["error"] is not None]
    if bg and rest and sum(bg) / len(bg) - sum(rest) / len(rest) > 0.03:
        note += (f" Policies that load drafts in the background while decoding ({', '.join(background)}) are "
                 f"simulated {sum(bg) / len(bg):+.1%} off on average, the others {sum(rest) / len(rest):+.1%}: the "
                 "cost model charges a load as elapsed storage time only, not the CPU its reading and "
                 "materialisation take from the decoding thread.")
    parts = []
    for n, v in sv.items():
        c = v.get("components")
        if not c:
            continue
        real, sim = c["real"], c["sim"]
        cells = [f"{sim[k] / real[k] - 1:+.1%}" if real.get(k) else "-" for k in ("rounds", "verify_s", "draft_s",
                                                                               "outside_s")]
        share = [f"{real[k] / sum(real[j] for j in ('verify_s', 'draft_s', 'stall_s', 'outside_s')):.0%}"
                 for k in ("verify_s", "draft_s", "outside_s")]
        parts.append((n, *cells, " / ".join(share)))
    components = ([] if not parts else
                  ["Where the simulated time differs from the real (simulated over real, summed over sessions; "
                   "stalls are in the table above):", "",
                   *_table(("configuration", "rounds", "verification s", "draft s", "outside rounds s",
                            "real share: verification / draft / outside"), parts), ""])
    return ["## Simulator vs real (experiment 1 configuration)", "",
            *_table(("configuration", "real tok/s", "simulated tok/s", "error", "error at probe speed", "real stall s",
                     "sim stall s"), rows),
            "", f"Mean absolute error {sum(errs) / len(errs):.1%}; worst {worst} ({sv[worst]['error']:+.1%}).{note} "
            "The sweeps' absolute numbers carry these errors; their comparisons between policies share one time "
            "model.", "", *components, "![simulator vs real](simulator.png)", ""]


def _workload_section(r: Results) -> list[str]:
    c = r["config"]
    w, split = c["workload"], c["split"]
    prompts = (c.get("catalogue") or {}).get("prompts", "models/heldout/prompts.jsonl")
    rows = [(s["name"], str(s["shift_every"]), str(s["topic_shifts"]), " > ".join(s["domains"])) for s in w["sessions"]]
    return ["## Workload and the predictor split", "",
            f"Evaluation prompts: `{prompts}`, cut from held-out documents (the corpora's 95/5 split "
            f"by document). The predictor was trained on prompts cut from training documents; "
            f"{split['excluded_prompts']} held-out prompt(s) whose exact text is also among the predictor's "
            f"{split['training_prompts']} training prompts were dropped (training prompts recovered from: "
            f"{split['source']}). The calibration session ({' > '.join(w['calibration']['domains'])}) uses prompts no "
            "evaluation session uses.", "",
            *_table(("session", "shift every", "topic shifts", "domains by turn"), rows), ""]


def _disturbance(r: Results) -> list[str]:
    """A warning when the run shared the machine with other work (every timing is then noisy)."""
    env = r["config"].get("environment", {})
    cores = env.get("cores") or 1
    load = env.get("load_average_1min") or {}
    busy = {k: v for k, v in load.items() if v > cores}
    errors = [v["error"] for v in (r.get("simulator_validation") or {}).values() if v.get("error") is not None]
    drift = sum(errors) / len(errors) if errors else 0.0
    if not busy and abs(drift) <= 0.2:
        return []
    why = []
    if busy:
        why.append("1-minute load average " + ", ".join(f"{v:.1f} ({k})" for k, v in busy.items())
                   + f" on {cores} cores")
    if abs(drift) > 0.2:
        why.append(f"real runs {drift:+.0%} off the time model calibrated at the start of the run")
    return [f"> **Warning: this run shared the machine with other work** ({'; '.join(why)}). Every configuration "
            "ran interleaved under the same conditions, but the absolute numbers, and policies that load in the "
            "background more than others, are affected. Rerun on an idle machine for figures to quote.", ""]


def _scaling_section(r: Results) -> list[str]:
    sc = r["experiments"].get("scaling")
    if not sc:
        return []
    size, length = sc["catalogue_size"], sc["dialogue_length"]
    names = ordered_names(list(size["policies"]))

    def us(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    rows = [(n, *(f"{t:.1f} / {us(p)} / {us(w)} / {_pct(s, 2)}"
                  for t, p, w, s in zip(size["policies"][n]["tokens_per_s"],
                                        size["policies"][n]["predictor_us_per_round"],
                                        size["policies"][n]["runtime_us_per_round"],
                                        size["policies"][n]["predictor_share"], strict=True)))
            for n in names]
    lrows = [(n, *("no turn" if w is None else f"{t:.1f} / {us(p)} / {us(w)}" for t, p, w in zip(
        length["policies"][n]["tokens_per_s"], length["policies"][n]["predictor_us_per_round"],
        length["policies"][n]["runtime_us_per_round"], strict=True))) for n in ordered_names(list(length["policies"]))]
    edges = length["bucket_upper_tokens"]
    return ["## Experiment 7: scaling (simulated rounds, measured scheduling costs)", "",
            "Catalogue size: the catalogue's drafts plus relabelled copies with 5% of their acceptance flipped "
            "(seeded). "
            "Each cell: simulated tokens/s / predictor us per round / all runtime work per round in us (policy, "
            "scheduler, pool, trackers, predictor, trace replay; measured wall time) / predictor share of a real "
            "round.", "", *_table(("policy", *(f"{v} drafts" for v in size["values"])), rows), "",
            f"Dialogue length: one conversation of {length['context_used']} tokens chained from the workload's turns "
            f"(context window {length['context_window']}), {length['drafts']} drafts; by context at the start of a "
            "turn. Each cell: tokens/s / predictor us per round / runtime us per round (\"no turn\": the "
            "conversation never reached that context).", "",
            *_table(("policy", *(f"<= {e} tokens" for e in edges)), lrows), ""]


def _pct(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v * 100:.{digits}f}%"


def render_report(results: Results) -> str:
    """The whole report as markdown."""
    c = results["config"]
    measured = (c.get("catalogue") or {}).get("path", "models/zoo/catalogue.yaml")
    lines = [f"# MemSpec benchmark report ({c['mode']} run, {c['created']})", "",
             f"Catalogue measured: `{measured}`.", "",
             "Generated by `python -m bench`; every number below was measured in this run, side by side on the "
             "same models, workload and machine. Results: `results.json`.", "", *_disturbance(results)]
    for section in (_config_section, _targets_section, _headline_section, _thread_section, _ablation_section,
                    _sweeps_section, _scaling_section, _simulator_section, _workload_section):
        lines += section(results)
    return "\n".join(lines).rstrip() + "\n"


def write_report(results: Results, out_dir: Path) -> Path:
    """Write ``report.md`` next to the results."""
    path = out_dir / "report.md"
    path.write_text(render_report(results))
    return path
