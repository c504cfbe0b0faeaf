"""Figures people would rather look at than read, drawn from a results document alone.

* ``headline.png`` - tokens/s per configuration: bars are totals over sessions, whiskers the
  slowest and fastest session, dots the individual sessions;
* ``metrics.png`` - the other per-policy figures (acceptance, tokens per round, stall, switches,
  loads, peak draft memory);
* ``timeline.png`` - one session's residency over time for MemSpec and the best adaptive
  baseline: which draft runs, which are resident or loading, stalls, topic shifts;
* ``sweep_*.png`` - each sweep as lines, one per policy (target-only dashed);
* ``ablation.png`` - the ablation by shift rate; ``simulator.png`` - simulated vs real tokens/s.

Matplotlib's Agg backend: no display needed. Every figure says its configuration in its title.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Patch

COLORS: dict[str, str] = {
    "static": "#9e9e9e", "reactive": "#f4a261", "ucb": "#e76f51", "exp3": "#d62828", "hedge": "#bc6c25",
    "ucb-resident": "#8d99ae",
    "memspec": "#1d4ed8", "memspec-predict-only": "#60a5fa", "memspec-manage-only": "#93c5fd",
    "oracle": "#2a9d8f", "target-only": "#264653", "hf-assisted": "#7b2cbf",
    "hf-assisted-heuristic": "#c77dff", "hf-prompt-lookup": "#e0aaff", "llama-cpp": "#6b705c",
    "llama-cpp-prompt-lookup": "#a5a58d",
}
LOADING_EDGE = "#4b5563"
STALL_COLOR = "#111827"
ORDER = ("static", "reactive", "ucb", "exp3", "hedge", "ucb-resident", "memspec-predict-only", "memspec-manage-only",
         "ngram-only", "memspec-no-ngram", "memspec", "oracle", "target-only", "hf-assisted", "hf-assisted-heuristic",
         "hf-prompt-lookup", "llama-cpp", "llama-cpp-prompt-lookup")

Results = Mapping[str, Any]


def ordered_names(names: Sequence[str]) -> list[str]:
    """Configurations in the order figures and tables list them (baselines, memspec family, references)."""
    known = [n for n in ORDER if n in names]
    return known + [n for n in names if n not in known]


def _subtitle(results: Results) -> str:
    c = results["config"]
    ratio = c.get("measured_load_round_ratio")
    return (f"budget {c['budget_drafts']} drafts, k={c['k']}, check every {c['check_interval']} rounds, "
            f"load/round {c['requested_load_round_ratio']} (measured {ratio:.2f}), "
            f"{c['threads']} thread(s), {c['mode']} run")


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_headline(results: Results, path: Path) -> Path:
    """Tokens/s bars with the spread over sessions."""
    pol = results["policies"]
    names = ordered_names(list(pol))
    fig, ax = plt.subplots(figsize=(11, 4.8))
    xs = range(len(names))
    tps = [pol[n]["tokens_per_s"] for n in names]
    ax.bar(xs, tps, color=[COLORS.get(n, "#888") for n in names], edgecolor="black", linewidth=0.6)
    for x, n in zip(xs, names, strict=True):
        sess = pol[n].get("session_tokens_per_s") or []
        if sess:
            ax.plot([x, x], [min(sess), max(sess)], color="black", linewidth=1.2)
            ax.scatter([x] * len(sess), sess, s=12, color="black", zorder=3)
        ax.text(x, max([pol[n]["tokens_per_s"], *sess]) * 1.02, f"{pol[n]['tokens_per_s']:.0f}", ha="center",
                va="bottom", fontsize=9)
    if "target-only" in pol:
        ax.axhline(pol["target-only"]["tokens_per_s"], color=COLORS["target-only"], linestyle=":", linewidth=1)
    ax.set_xticks(list(xs), names, rotation=30, ha="right")
    ax.set_ylabel("tokens / s (real runs)")
    ax.set_title("Experiment 1: throughput per configuration (bar = all sessions; line = slowest..fastest "
                 "session)\n" + _subtitle(results), fontsize=10)
    ax.set_ylim(0, max(max(p.get("session_tokens_per_s") or [p["tokens_per_s"]]) for p in pol.values()) * 1.15)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_metrics(results: Results, path: Path) -> Path:
    """Acceptance, tokens/round, stall, switches, loads, peak draft memory per configuration."""
    pol = results["policies"]
    names = ordered_names(list(pol))
    panels = (("acceptance_rate", "acceptance rate", 1.0), ("mean_accepted_length", "tokens per round", 1.0),
              ("stall_s", "stall seconds", 1.0), ("switches", "draft switches", 1.0), ("loads", "loads", 1.0),
              ("peak_memory_bytes", "peak draft memory (MB)", 1e-6))
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, (key, label, scale) in zip(axes.flat, panels, strict=True):
        vals = [(pol[n].get(key) or 0) * scale for n in names]
        ax.bar(range(len(names)), vals, color=[COLORS.get(n, "#888") for n in names], edgecolor="black",
               linewidth=0.5)
        ax.set_title(label, fontsize=10)
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    budget = results["config"].get("budget_bytes")
    if budget:
        axes.flat[5].axhline(budget * 1e-6, color="red", linestyle="--", linewidth=1)
        axes.flat[5].text(0, budget * 1e-6, " budget", color="red", va="bottom", fontsize=8)
    fig.suptitle("Experiment 1: per-policy figures (real runs, totals over sessions)\n" + _subtitle(results),
                 fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _spans(tl: Mapping[str, Any]) -> list[tuple[float, float, Mapping[str, Any]]]:
    """Each round's state held from its start until the next round of the same turn starts."""
    rounds = tl["rounds"]
    turn_ends = [t["end"] for t in tl["turns"]]
    out = []
    for i, r in enumerate(rounds):
        nxt = rounds[i + 1]["start"] if i + 1 < len(rounds) else r["end"]
        same_turn = not any(r["end"] <= e < nxt for e in turn_ends)
        out.append((r["start"], nxt if same_turn else r["end"], r))
    return out


def _merged(spans: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """``(start, width)`` bars from touching ``(start, end)`` spans (one bar, not one per round)."""
    bars: list[list[float]] = []
    for a, b in spans:
        if bars and a <= bars[-1][1] + 1e-9:
            bars[-1][1] = max(bars[-1][1], b)
        else:
            bars.append([a, b])
    return [(a, max(b - a, 1e-4)) for a, b in bars]


def _draw_timeline(ax: plt.Axes, tl: Mapping[str, Any], drafts: Sequence[str], xmax: float) -> None:
    row = {d: i for i, d in enumerate(drafts)}
    stall_row = len(drafts)
    spans = _spans(tl)
    color = COLORS.get(tl["policy"], "#1d4ed8")
    for d, y in row.items():
        resident = _merged([(a, b) for a, b, r in spans if d in r["resident"]])
        # a stall is the wait for the round's draft to load: show it loading meanwhile
        loading = _merged(sorted([(a, b) for a, b, r in spans if d in r["loading"]]
                                 + [(r["start"], r["start"] + r["stall_s"]) for r in tl["rounds"]
                                    if r["draft"] == d and r["stall_s"] > 0]))
        active = _merged([(a, b) for a, b, r in spans if r["draft"] == d])
        ax.broken_barh(resident, (y - 0.35, 0.7), facecolors="#d1d5db", edgecolor="none")
        ax.broken_barh(loading, (y - 0.35, 0.7), facecolors="white", edgecolor=LOADING_EDGE, hatch="////",
                       linewidth=0.0)
        ax.broken_barh(active, (y - 0.22, 0.44), facecolors=color, edgecolor="none")
    stalls = [(r["start"], r["stall_s"]) for r in tl["rounds"] if r["stall_s"] > 0]
    ax.broken_barh(stalls, (stall_row - 0.35, 0.7), facecolors=STALL_COLOR, edgecolor="none")
    prev = None
    for i, t in enumerate(tl["turns"]):
        if prev is not None and t["domain"] != prev:
            ax.axvline(t["start"], color="black", linestyle="--", linewidth=1)
        ax.text(t["start"], stall_row + (0.7 if i % 2 == 0 else 1.25), f" {t['domain']}", fontsize=8, va="bottom",
                ha="left", clip_on=True)
        prev = t["domain"]
    ax.set_yticks(range(len(drafts) + 1), [*drafts, "stall"], fontsize=8)
    ax.set_ylim(-0.6, stall_row + 1.9)
    ax.set_xlim(0, xmax)
    ax.set_title(f"{tl['policy']}  ({tl['session']}, topic shift every {tl['shift_every']} turn(s))", fontsize=10,
                 loc="left")


def plot_timeline(results: Results, path: Path) -> Path | None:
    """MemSpec's and the best adaptive baseline's residency over one session."""
    timelines = results.get("timelines") or {}
    best = next((t["reference"] for t in results.get("targets", []) if t["target"] == "best adaptive baseline"),
                None)
    shown = [n for n in ("memspec", best) if n and n in timelines]
    if not shown:
        return None
    drafts = list(results["config"]["models"]["drafts"])
    xmax = max(timelines[n]["turns"][-1]["end"] for n in shown)
    fig, axes = plt.subplots(len(shown), 1, figsize=(13, 2.2 + 1.9 * len(shown)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], shown, strict=True):
        _draw_timeline(ax, timelines[name], drafts, xmax)
    axes[-1, 0].set_xlabel("seconds since the session started (real run)")
    legend = [Patch(facecolor=COLORS["memspec"], label="proposing (policy's colour)"),
              Patch(facecolor="#d1d5db", label="resident"),
              Patch(facecolor="white", edgecolor=LOADING_EDGE, hatch="////", label="loading"),
              Patch(facecolor=STALL_COLOR, label="decoder stalled (waiting for a load)"),
              plt.Line2D([0], [0], color="black", linestyle="--", label="topic shift")]
    fig.suptitle("Residency timeline of one session (real runs)\n" + _subtitle(results), fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.legend(handles=legend, loc="lower center", ncol=5, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    return _save(fig, path)


def plot_sweep(results: Results, key: str, title: str, xlabel: str, path: Path, *, log_x: bool = False) -> Path:
    """One sweep: tokens/s against the swept value, one line per policy."""
    sweep = results["experiments"][key]
    xs = list(range(len(sweep["values"]))) if not log_x else sweep["values"]
    fig, ax = plt.subplots(figsize=(9, 5))
    for name in ordered_names(list(sweep["policies"])):
        ys = sweep["policies"][name]["tokens_per_s"]
        ax.plot(xs, ys, marker="o", color=COLORS.get(name, "#888"), label=name,
                linewidth=2.6 if name == "memspec" else 1.4, zorder=3 if name == "memspec" else 2)
    if sweep.get("target-only"):
        ax.plot(xs, sweep["target-only"], color=COLORS["target-only"], linestyle="--", label="target-only (modelled)")
    if log_x:
        ax.set_xscale("log")
        ax.set_xticks(sweep["values"], [str(v) for v in sweep["values"]])
        ax.minorticks_off()
    else:
        ax.set_xticks(xs, sweep.get("labels") or [str(v) for v in sweep["values"]], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("tokens / s (simulated)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(f"{title}\nother knobs as in experiment 1: {_subtitle(results)}", fontsize=9)
    return _save(fig, path)


def plot_ablation(results: Results, path: Path) -> Path | None:
    """The ablation policies' real tokens/s, per shift rate and overall."""
    ab = results["experiments"].get("ablation") or {}
    by_rate = ab.get("tokens_per_s_by_shift_rate") or {}
    if not by_rate:
        return None
    names = [n for n in ("memspec", "memspec-predict-only", "memspec-manage-only", "target-only")
             if n in next(iter(by_rate.values()))]
    groups = [*by_rate, "all"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        vals = [by_rate[g].get(name, 0) for g in by_rate] + [results["policies"][name]["tokens_per_s"]]
        ax.bar([i + j * width for i in range(len(groups))], vals, width, color=COLORS.get(name, "#888"), label=name,
               edgecolor="black", linewidth=0.5)
    ax.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(groups))],
                  [f"shift every {g} turn(s)" if g != "all" else "all sessions" for g in groups])
    ax.set_ylabel("tokens / s (real runs)")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("Experiment 2: ablation - prediction and working-set management\n" + _subtitle(results), fontsize=10)
    return _save(fig, path)


def plot_simulator(results: Results, path: Path) -> Path | None:
    """Simulated against real tokens/s for the headline configurations."""
    sv = results.get("simulator_validation") or {}
    if not sv:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 6))
    top = max(max(v["real_tokens_per_s"], v["sim_tokens_per_s"]) for v in sv.values()) * 1.1
    ax.plot([0, top], [0, top], color="black", linewidth=1)
    ax.fill_between([0, top], [0, top * 0.9], [0, top * 1.1], color="#e5e7eb", label="within 10%")
    for name, v in sv.items():
        ax.scatter(v["real_tokens_per_s"], v["sim_tokens_per_s"], color=COLORS.get(name, "#888"), s=40, zorder=3)
        ax.annotate(name, (v["real_tokens_per_s"], v["sim_tokens_per_s"]), fontsize=7, xytext=(4, -3),
                    textcoords="offset points")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("real tokens / s")
    ax.set_ylabel("simulated tokens / s")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Simulator vs real runs (experiment 1)", fontsize=10)
    return _save(fig, path)


SWEEP_PLOTS = (
    ("check_interval", "Experiment 3: check interval", "check interval (rounds)", "sweep_check_interval.png", True),
    ("generation_length", "Experiment 4: generation length (first n turns of every session)",
     "turns per session", "sweep_length.png", False),
    ("budget", "Experiment 5: memory budget", "drafts that fit in memory", "sweep_budget.png", False),
    ("load_round_ratio", "Experiment 6: load time / round time", "load/round ratio", "sweep_ratio.png", True),
)


def draw_all(results: Results, out_dir: Path) -> list[Path]:
    """Every figure; returns the files written."""
    out = [plot_headline(results, out_dir / "headline.png"), plot_metrics(results, out_dir / "metrics.png"),
           plot_timeline(results, out_dir / "timeline.png"), plot_ablation(results, out_dir / "ablation.png"),
           plot_simulator(results, out_dir / "simulator.png")]
    for key, title, xlabel, name, log_x in SWEEP_PLOTS:
        if key in results.get("experiments", {}):
            out.append(plot_sweep(results, key, title, xlabel, out_dir / name, log_x=log_x))
    return [p for p in out if p is not None]
