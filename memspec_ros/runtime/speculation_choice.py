"""``num_speculative_tokens: 0`` and ``check_interval: 0`` (auto): both chosen at configure by measurement.

**k**, the most tokens a round may propose (memspec chooses each round's length up to it from
its forecast acceptance). What makes a ceiling fast is how long the drafts' runs of accepted
tokens last on the robot's own dialogue against what a draft step and a longer verification
cost on this machine. The two halves are measured where each can be measured well:

* acceptance runs at build time, exactly: ``memspec_build evaluate`` simulates greedy rounds of
  every k from 1 to 8 on match vectors of the held-out dialogue and writes them
  (``own_rounds_by_k`` in ``reports/evaluation.json`` beside the catalogue);
* times at configure, on this machine, in the node's dtype and thread count: the target's
  verification of 2 to 9 tokens and one draft step (the largest domain draft the budget
  admits), medians of interleaved repeats.

For each domain draft, each k's modelled rate on its own domain is ``(accepted + rounds) /
(proposed * step + rounds * verify(k + 1))`` and its best fixed k the smallest within
:data:`NEAR_BEST` of its best rate. The ceiling is the *largest* of these: memspec shortens a
round itself where the forecast acceptance is low, so the ceiling only has to let the draft that
gains most from long rounds reach its best. (Pooling every draft's rounds into one fixed k was
tried first: on the default model set it chose 2, and memspec ran 0.948x its speed at k 4 in a
real A/B, 8 sessions x 6 turns, 2026-12-07; the per-draft rule chooses 4 there.) Timing whole
generations at each k instead, as
threads are chosen, was rejected: a probe prompt says nothing of the drafts' acceptance, and
the benchmark's own k sweep (3 sessions x 4 turns) spread 1.20-1.31x, more than the choice is
worth. Without the report (a catalogue not built by ``memspec_build``, or built before it
wrote the rounds) k stays :data:`FALLBACK_K`, the fastest in that sweep, and the log says why.

**check interval**, rounds between scheduling decisions: smaller reacts sooner within a turn (a
turn's first round always decides, so a new topic is met at once whatever the interval), and
every decision (the predictor's forecast, prefetch and eviction) costs CPU that the decoding
shares. Configure times decisions of the node's own policy through the runtime (a short
generation that decides after every round) and takes the smallest interval of :data:`INTERVALS`
whose decisions cost at most :data:`TICK_SHARE` of the rounds between them (round time from the
timings above). The candidates start at 4 because a decision's timing misses what it sets off:
a decision may switch drafts, and the new draft first catches up on the context. Interval 1,
whose decisions timed at 1% of decoding on the default model set, ran 0.969x interval 4 in a real
A/B (8 sessions x 6 turns, 2026-12-07); the benchmark's simulated sweep, which prices switches,
was flat from 1 to 8. So the measurement raises the interval where decisions are costly (a large
predictor, a slow CPU) and never lowers it below 4.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.sampling import GREEDY
from memspec_ros.core.scorer import TargetScorer

from .catalogue import Budget, Catalogue
from .loader import Materializer
from .policies import Policy
from .runtime import DraftRuntime, RuntimeConfig

MAX_K = 8
"""The longest ceiling considered (``memspec_build evaluate`` reports rounds up to it)."""
FALLBACK_K = 4
FALLBACK_INTERVAL = 4
INTERVALS = (4, 8, 16)
TICK_SHARE = 0.01
"""A scheduling decision may cost at most this share of the decoding time between decisions. Low
on purpose: configure times decisions inline, and in the node each also wakes an executor thread
whose predictor call shares the cores with decoding, which that timing does not see."""
NEAR_BEST = 0.02
"""Ceilings whose modelled rate is within this fraction of the best count as ties (the shorter wins)."""
PROBE_PROMPT = "Good morning! Could you bring me a glass of water from the kitchen, please?"
PROBE_TOKENS = 16
GENERAL_DOMAINS = ("general", "mixed")


@dataclass(frozen=True)
class SpeculationChoice:
    """The chosen ceiling and interval, and what they were chosen from (for the configure log)."""

    k: int
    check_interval: int
    k_auto: bool = True
    interval_auto: bool = True
    k_reason: str = ""
    """Why k was not modelled (empty when it was, or when the parameter set it)."""
    k_by_draft: dict[str, int] = field(default_factory=dict)
    """Each domain draft's best fixed k on its own domain; the ceiling is the largest."""
    k_rates: dict[int, float] = field(default_factory=dict)
    """Modelled tokens/s by k of the draft that set the ceiling."""
    verify_ms: dict[int, float] = field(default_factory=dict)
    draft_step_ms: float | None = None
    probe_draft: str | None = None
    tick_ms: float | None = None
    round_ms: float | None = None

    def describe(self) -> str:
        """``k ...`` and ``check_interval ...``: how each was set or chosen."""
        k = f"k auto: {self.describe_k()}" if self.k_auto else f"k={self.k}"
        interval = (f"check_interval auto: {self.describe_interval()}" if self.interval_auto
                    else f"check_interval={self.check_interval}")
        return f"{k}, {interval}"

    def describe_k(self) -> str:
        if not self.k_rates:
            return f"{self.k} ({self.k_reason})"
        rates = ", ".join(f"{k}: {r:.1f}" for k, r in self.k_rates.items())
        best = ", ".join(f"{n} {k}" for n, k in self.k_by_draft.items())
        leader = max(self.k_by_draft, key=self.k_by_draft.__getitem__)
        return (f"{self.k} (the longest of the domain drafts' best fixed k: {best}; {leader}'s modelled tok/s by k "
                f"{rates}; {self.probe_draft} step {self.draft_step_ms:.2f} ms, "
                f"verification {self.verify_ms.get(2, 0):.1f}-{self.verify_ms.get(MAX_K + 1, 0):.1f} ms "
                "for 2-9 tokens; acceptance from the build's evaluation)")

    def describe_interval(self) -> str:
        if self.tick_ms is None or self.round_ms is None:
            return f"{self.check_interval}"
        return (f"{self.check_interval} (a scheduling decision {self.tick_ms:.2f} ms, a round "
                f"{self.round_ms:.1f} ms: decisions within {TICK_SHARE:.0%} of decoding)")


Rounds = dict[int, tuple[int, int, int]]
"""``(accepted, proposed, rounds)`` of greedy rounds by k."""


def read_rounds_by_k(root: Path, draft_names: Sequence[str]) -> tuple[dict[str, Rounds] | None, str]:
    """Each domain draft's rounds by k on its own domain (from the build's evaluation), or None and why.

    The general draft counts only when the catalogue has no domain draft: the ceiling matters
    when the right specialist is resident, which is what the working-set manager is for.
    """
    path = root / "reports" / "evaluation.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"no {path}: run memspec_build evaluate on the model set"
    except (OSError, ValueError) as exc:
        return None, f"{path} is unreadable ({type(exc).__name__}): rerun memspec_build evaluate"
    rounds = report.get("own_rounds_by_k") if isinstance(report, dict) else None
    if not isinstance(rounds, dict):
        return None, f"{path} has no rounds by k (written before memspec_build reported them): rerun evaluate"
    domains = report.get("drafts", {})
    served = [n for n in draft_names if n in rounds]
    specialists = [n for n in served if domains.get(n, {}).get("domain") not in GENERAL_DOMAINS]
    chosen = specialists or served
    if not chosen:
        return None, f"{path} evaluates none of the catalogue's drafts {list(draft_names)}: rerun evaluate"
    out: dict[str, Rounds] = {}
    try:
        for name in chosen:
            by_k = {k: rounds[name][str(k)] for k in range(1, MAX_K + 1)}
            out[name] = {k: (int(r[0]), int(r[1]), int(r[2])) for k, r in by_k.items()}
    except (KeyError, TypeError, IndexError, ValueError):
        return None, f"{path}: malformed own_rounds_by_k: rerun memspec_build evaluate"
    out = {n: r for n, r in out.items() if any(p for _, p, _ in r.values())}
    if not out:
        return None, f"{path} records no proposals: rerun memspec_build evaluate"
    return out, ""


def modelled_rates(rounds: Rounds, verify_ms: dict[int, float], step_ms: float) -> dict[int, float]:
    """Tokens/s at each ceiling: the build's rounds at that k, priced at this machine's times."""
    rates = {}
    for k, (accepted, proposed, n_rounds) in sorted(rounds.items()):
        if k + 1 in verify_ms and n_rounds:
            rates[k] = 1e3 * (accepted + n_rounds) / (proposed * step_ms + n_rounds * verify_ms[k + 1])
    return rates


def pick_k(rates: dict[int, float]) -> int:
    """The smallest ceiling within :data:`NEAR_BEST` of the best modelled rate."""
    best = max(rates.values())
    return min(k for k, r in rates.items() if r >= best * (1.0 - NEAR_BEST))


def pick_ceiling(rounds: dict[str, Rounds], verify_ms: dict[int, float], step_ms: float
                 ) -> tuple[int, dict[str, int], dict[int, float]]:
    """The ceiling (the largest of the drafts' best fixed k), each draft's best, and the rates of
    the draft that set it."""
    rates = {n: modelled_rates(r, verify_ms, step_ms) for n, r in rounds.items()}
    best = {n: pick_k(r) for n, r in rates.items() if r}
    if not best:
        return FALLBACK_K, {}, {}
    leader = max(best, key=best.__getitem__)
    return best[leader], best, rates[leader]


def pick_interval(tick_ms: float, round_ms: float) -> int:
    """The smallest interval whose decisions cost at most :data:`TICK_SHARE` of its rounds."""
    return next((i for i in INTERVALS if tick_ms <= TICK_SHARE * i * round_ms), INTERVALS[-1])


@torch.inference_mode()
def time_verification(target: torch.nn.Module, context: Sequence[int], lengths: Sequence[int],
                      repeats: int = 5) -> dict[int, float]:
    """Median ms to verify each block length after ``context``, lengths interleaved per repeat
    (a busy spell of the machine lands on all of them, not on one)."""
    scorer = TargetScorer(target)
    scorer.prefill(list(context))
    block = list(context[: max(lengths)])
    samples: dict[int, list[float]] = {n: [] for n in lengths}
    for rep in range(repeats + 1):
        for n in lengths:
            t0 = time.perf_counter()
            scorer.score(block[:n])
            elapsed = time.perf_counter() - t0
            scorer.rollback(n)
            if rep:  # the first pass pays one-time initialisation
                samples[n].append(elapsed * 1e3)
    return {n: statistics.median(v) for n, v in samples.items()}


def time_draft_step(proposer, context: Sequence[int], repeats: int = 9) -> float:
    """Median ms of a one-token proposal in steady state (each call adds one committed token)."""
    base = len(context) - repeats - 1
    proposer.reset()
    proposer.propose(list(context[:base]), 1, GREEDY)
    samples = [proposer.propose(list(context[: base + i]), 1, GREEDY).seconds * 1e3 for i in range(1, repeats + 1)]
    proposer.reset()
    return statistics.median(samples)


def probe_draft(catalogue: Catalogue, budget: Budget):
    """The largest domain draft the budget admits alone (its step is what a round pays), else any."""
    fitting = [s for s in catalogue if budget.admits([s.size_bytes])]
    domain = [s for s in fitting if s.domain not in GENERAL_DOMAINS]
    return max(domain or fitting, key=lambda s: s.size_bytes) if fitting else None


def choose_speculation(engine: SpeculativeEngine, catalogue: Catalogue, budget: Budget, materialize: Materializer,
                       make_policy: Callable[[], Policy], root: Path, *, k: int = 0,
                       check_interval: int = 0) -> SpeculationChoice:
    """Resolve ``k`` and ``check_interval`` where they are 0 (auto); leave set values as they are.

    Runs after the dtype and thread count are settled (it times what the node will run). The
    probing runtime is closed, its drafts dropped, before the node's runtime loads its own.
    """
    if k and check_interval:
        return SpeculationChoice(k, check_interval, k_auto=False, interval_auto=False)

    def defaults(reason: str, **measured) -> SpeculationChoice:
        """The set values, the fallbacks for auto ones, and why nothing was chosen."""
        return SpeculationChoice(k or FALLBACK_K, check_interval or FALLBACK_INTERVAL, k_auto=not k,
                                 interval_auto=not check_interval, k_reason=reason, **measured)

    spec = probe_draft(catalogue, budget)
    if spec is None:
        return defaults("no draft fits the memory budget")
    rounds, reason = read_rounds_by_k(root, catalogue.names) if not k else (None, "")
    vocab = int(engine.target.config.get_text_config().vocab_size)
    length = min(160, engine.max_context - MAX_K - 2)  # within the target's positions, however few
    if length < 48:
        return defaults(f"a context of {engine.max_context} tokens is too short to time rounds")
    context = torch.randint(0, vocab, (length,), generator=torch.Generator().manual_seed(0)).tolist()
    verify = time_verification(engine.target, context[: length - 32], range(1, MAX_K + 2))
    runtime = DraftRuntime(engine, catalogue, budget, make_policy(),
                           RuntimeConfig(k=k or FALLBACK_K, check_interval=1), materialize=materialize)
    try:
        if spec.name not in runtime.warm_up([spec.name]):  # a damaged file: serving will say so; keep defaults
            return defaults(f"draft {spec.name} did not load for timing", verify_ms=verify)
        proposer = runtime.pool.acquire(spec.name)
        try:
            step = time_draft_step(proposer, context)
        finally:
            runtime.pool.release(spec.name)
        by_draft: dict[str, int] = {}
        rates: dict[int, float] = {}
        chosen_k = k or FALLBACK_K
        if rounds:
            chosen_k, by_draft, rates = pick_ceiling(rounds, verify, step)
        tick_ms = round_ms = None
        chosen_interval = check_interval
        if not check_interval:
            runtime.reconfigure(k=chosen_k)
            prompt = engine.encode(PROBE_PROMPT)
            runtime.generate(prompt, 4)  # untimed: first-call initialisation
            ticks0, seconds0 = runtime.scheduler.stats.ticks, runtime.scheduler.stats.seconds
            runtime.generate(prompt, PROBE_TOKENS)
            ticks = runtime.scheduler.stats.ticks - ticks0
            tick_ms = 1e3 * (runtime.scheduler.stats.seconds - seconds0) / max(1, ticks)
            round_ms = verify[chosen_k + 1] + chosen_k * step
            chosen_interval = pick_interval(tick_ms, round_ms)
    finally:
        runtime.close()
    return SpeculationChoice(chosen_k, chosen_interval, k_auto=not k, interval_auto=not check_interval,
                             k_reason=reason, k_by_draft=by_draft, k_rates=rates,
                             verify_ms=verify, draft_step_ms=step, probe_draft=spec.name, tick_ms=tick_ms,
                             round_ms=round_ms)
