"""The simulator's time model, built from times measured on the real components.

Every term mirrors a piece of real work, in the engine's own structure:

* a round with draft ``d`` proposing ``p`` tokens costs one draft forward over the ``suffix`` of
  context the draft has not seen (one token normally; the whole context after a fresh load),
  ``p - 1`` single-token draft steps, and one target verification of ``p + 1`` tokens;
* a turn costs the target's prefill of its prompt;
* a load costs the storage read (paced to the emulated bandwidth) plus materialisation;
* scheduling costs a tick, plus the predictor's call for predictor-driven policies;
* the runtime's own per-round bookkeeping is a constant overhead.

:func:`measure_cost_model` times these on the real target, drafts and loader (medians of
repeated microbenchmarks); :func:`calibrate_overheads` takes the bookkeeping constants from a
short calibration run, which must not be one of the runs the simulator is validated against.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from memspec_ros.core.ngram_proposer import NGRAM_NAME


@dataclass
class CostModel:
    """Seconds per unit of work (see module docstring)."""

    verify_s: dict[int, float]
    """Target verification by number of proposed tokens (0 = a target-only step), at a context
    of ``verify_ref_len`` tokens."""
    draft_step_s: dict[str, float]
    """One single-token draft step."""
    draft_feed_s: dict[str, tuple[float, float]]
    """A multi-token draft forward: ``intercept + slope * tokens``."""
    draft_propose_s: dict[str, dict[int, float]] = field(default_factory=dict)
    """A whole steady-state proposal of ``p`` tokens (one new context token), by ``p``."""
    draft_propose2_s: dict[str, dict[int, float]] = field(default_factory=dict)
    """The same after a fully accepted round (two new context tokens: a full forward, not a step)."""
    prefill_s: tuple[float, float] = (0.0, 0.0)
    """Target prefill: ``intercept + slope * tokens``."""
    load_s: dict[str, float] = field(default_factory=dict)
    """Storage-to-resident time per draft."""
    verify_ref_len: int = 0
    verify_slope_s: float = 0.0
    """Extra seconds of a full verification (k proposed tokens) per context token (attention over a
    longer KV cache)."""
    step_slope_s: float | None = None
    """The same for a one-token target step (0 proposed): attention grows with the tokens scored
    times the context, so a step's slope is a fraction of a k+1-token verification's, and charging
    it the verification's slope over-charged long target-only dialogues by 15%. A verification of
    ``p`` tokens is interpolated between the two. None: measured before this existed, use
    ``verify_slope_s`` for every length."""
    draft_slope_s: float = 0.0
    """Extra seconds per proposed token per context token (the draft's attention)."""
    round_overhead_s: float = 0.0
    loading_factor: float = 1.0
    """How much longer a round's draft and verification take while a draft load is in flight
    (the loader's reading and materialisation share the process with the decoding thread)."""
    turn_overhead_s: float = 0.0
    tick_s: float = 0.0
    predictor_s: float = 0.0
    """One predictor call (forecast plus online adaptation)."""
    ngram_propose_s: float = 0.0
    """One n-gram lookup (:mod:`memspec_ros.core.ngram_proposer`) over the calibration context:
    what the n-gram member's proposal costs, whatever it finds."""

    def feed_s(self, draft: str, tokens: int) -> float:
        """Draft forward over ``tokens`` new context tokens."""
        if tokens <= 1:
            return self.draft_step_s[draft]
        a, b = self.draft_feed_s[draft]
        return max(self.draft_step_s[draft], a + b * tokens)

    def propose_s(self, draft: str, k_round: int, suffix: int) -> float:
        """A whole proposal: feed the unseen suffix, then ``k_round - 1`` single steps.

        Uses the measured steady-state proposal of ``k_round`` tokens when available, plus
        the extra cost of feeding a longer suffix (catch-up) in one forward.
        """
        if k_round <= 0:
            return 0.0
        if suffix == 2 and k_round in self.draft_propose2_s.get(draft, {}):
            return self.draft_propose2_s[draft][k_round]
        extra = self.feed_s(draft, suffix) - self.draft_step_s[draft] if suffix > 1 else 0.0
        measured = self.draft_propose_s.get(draft, {}).get(k_round)
        if measured is not None:
            return measured + max(0.0, extra)
        return self.feed_s(draft, suffix) + (k_round - 1) * self.draft_step_s[draft]

    def verify(self, proposed: int, context: int | None = None) -> float:
        """Verification of ``proposed`` draft tokens (plus the last committed token)."""
        base = self.verify_s[proposed] if proposed in self.verify_s else self.verify_s[max(self.verify_s)]
        if context is None:
            return base
        return max(0.0, base + self.context_slope(proposed) * (context - self.verify_ref_len))

    def context_slope(self, proposed: int) -> float:
        """Extra seconds per context token of a verification of ``proposed`` tokens."""
        if self.step_slope_s is None:
            return self.verify_slope_s
        full = max(self.verify_s)
        share = min(1.0, proposed / full) if full > 0 else 1.0
        return self.step_slope_s + share * (self.verify_slope_s - self.step_slope_s)

    def propose_at(self, draft: str, k_round: int, suffix: int, context: int) -> float:
        """:meth:`propose_s` corrected for the context length (see ``draft_slope_s``); the n-gram
        member's proposal is one lookup whatever the length."""
        if draft == NGRAM_NAME:
            return self.ngram_propose_s if k_round else 0.0
        base = self.propose_s(draft, k_round, suffix)
        return max(0.0, base + self.draft_slope_s * k_round * (context - self.verify_ref_len)) if k_round else 0.0

    def prefill(self, tokens: int) -> float:
        """Target prefill of ``tokens`` prompt tokens."""
        return 0.0 if tokens <= 0 else self.prefill_s[0] + self.prefill_s[1] * tokens

    def mean_round_s(self, k: int) -> float:
        """A typical speculative round (mean over drafts, no catch-up)."""
        proposals = [self.propose_s(d, k, 1) for d in self.draft_step_s]
        return float(np.mean(proposals)) + self.verify(k) + self.round_overhead_s

    def load_round_ratio(self, k: int) -> float:
        """Mean load time over a typical round: the regime being modelled."""
        return float(np.mean(list(self.load_s.values()))) / self.mean_round_s(k) if self.load_s else 0.0

    def compute_scaled(self, factor: float, draft_factors: Mapping[str, float] | None = None) -> CostModel:
        """A copy whose compute times are ``factor`` times longer (``draft_factors`` per draft, if given).

        ``factor`` scales the target's work (verification, prefill, their context slopes) and the
        bookkeeping overheads; a draft's steps, catch-up forwards and proposals use its entry of
        ``draft_factors`` (default ``factor``). Load times are left alone: they are paced storage
        reads (wall time), not computation. What this is for: the same machine runs slower or
        faster from one minute to the next (other work, clock and cache state), and a model
        calibrated before a long run can then be rescaled by what the run's own rounds measured.
        """
        per = dict(draft_factors or {})

        def f(draft: str) -> float:
            return per.get(draft, factor)

        d = asdict(self)
        d["verify_s"] = {k: v * factor for k, v in self.verify_s.items()}
        d["draft_step_s"] = {n: v * f(n) for n, v in self.draft_step_s.items()}
        d["draft_feed_s"] = {n: (a * f(n), b * f(n)) for n, (a, b) in self.draft_feed_s.items()}
        for key in ("draft_propose_s", "draft_propose2_s"):
            d[key] = {n: {p: v * f(n) for p, v in m.items()} for n, m in getattr(self, key).items()}
        d["prefill_s"] = (self.prefill_s[0] * factor, self.prefill_s[1] * factor)
        for key in ("verify_slope_s", "draft_slope_s", "round_overhead_s", "turn_overhead_s", "tick_s",
                    "predictor_s"):
            d[key] = getattr(self, key) * factor
        d["ngram_propose_s"] = self.ngram_propose_s * f(NGRAM_NAME)
        if self.step_slope_s is not None:
            d["step_slope_s"] = self.step_slope_s * factor
        return CostModel(**d)

    def with_loads(self, load_s: Mapping[str, float]) -> CostModel:
        """A copy with other load times (e.g. another emulated bandwidth)."""
        d = asdict(self)
        d["load_s"] = dict(load_s)
        return CostModel(**d)

    def to_json(self) -> str:
        """Serialise (for results files)."""
        d = asdict(self)
        d["verify_s"] = {str(k): v for k, v in self.verify_s.items()}
        return json.dumps(d, indent=1)

    @classmethod
    def from_json(cls, text: str) -> CostModel:
        """Inverse of :meth:`to_json`."""
        d = json.loads(text)
        d["verify_s"] = {int(k): v for k, v in d["verify_s"].items()}
        d["draft_feed_s"] = {k: tuple(v) for k, v in d["draft_feed_s"].items()}
        for key in ("draft_propose_s", "draft_propose2_s"):
            d[key] = {n: {int(p): v for p, v in m.items()} for n, m in d.get(key, {}).items()}
        d["prefill_s"] = tuple(d["prefill_s"])
        return cls(**d)

    def save(self, path: Path | str) -> None:
        """Write JSON."""
        Path(path).write_text(self.to_json())


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(intercept), float(max(slope, 0.0))


@torch.inference_mode()
def measure_cost_model(
    target: torch.nn.Module,
    proposers: Mapping[str, object],
    context: Sequence[int],
    k: int,
    *,
    load_s: Mapping[str, float] | None = None,
    repeats: int = 15,
    engine=None,
    round_prompts: Sequence[str] = (),
    max_new_tokens: int = 48,
) -> CostModel:
    """Time the real target and drafts (``DraftProposer`` objects) on ``context`` token ids.

    ``context`` should be a realistic prompt-plus-output (a few hundred tokens); ``load_s``
    comes from real loads. With ``engine`` and ``round_prompts`` the proposal and verification
    times are then replaced by medians from real engine rounds (:func:`measure_round_costs`),
    which is what a simulation should use: microbenchmarks run with warm CPU caches.
    """
    from memspec_ros.core.ngram_proposer import NgramProposer
    from memspec_ros.core.position_limit import context_bound
    from memspec_ros.core.sampling import GREEDY
    from memspec_ros.core.scorer import TargetScorer

    # Within the target's positions: a session's tokens can outgrow a model with learned
    # positions (GPT-2's 512 or 1024), whose embedding lookup would fail past them.
    window = engine.max_context if engine is not None else context_bound(target.config)
    ctx = list(context)[:window]
    base = max(2, len(ctx) // 2)  # mid-session context length: attention cost grows with it
    scorer = TargetScorer(target)

    def verify_at(length: int, p: int) -> float:
        scorer.reset()
        scorer.prefill(ctx[: length - 1])
        block = ctx[length - 1: length + p]

        def run() -> None:
            scorer.score(block)
            scorer.rollback(len(block))

        run()
        return _median_time(run, repeats)

    verify_s = {p: verify_at(base, p) for p in range(0, k + 1)}
    short, long_ = max(2, min(48, len(ctx) // 8)), len(ctx) - k - 1
    verify_slope = max(0.0, (verify_at(long_, k) - verify_at(short, k)) / max(1, long_ - short))
    step_slope = max(0.0, (verify_at(long_, 0) - verify_at(short, 0)) / max(1, long_ - short))
    prefill_n = [8, 32, 96]
    prefill_t = []
    for n in prefill_n:
        def pre(n: int = n) -> None:
            scorer.reset()
            scorer.prefill(ctx[:n])
        pre()
        prefill_t.append(_median_time(pre, max(3, repeats // 3)))
    step_s: dict[str, float] = {}
    feed_s: dict[str, tuple[float, float]] = {}
    propose_s: dict[str, dict[int, float]] = {}
    slopes_lo: list[float] = []
    slopes_hi: list[float] = []
    for name, prop in proposers.items():
        # Steady state: each call adds one committed token, as rounds do (lean 1-token feeds).
        propose_s[name] = {}
        for p in range(1, k + 1):
            prop.reset()
            prop.propose(ctx[:base], p, GREEDY)
            samples = [prop.propose(ctx[: base + i], p, GREEDY).seconds for i in range(1, repeats + 1)]
            propose_s[name][p] = statistics.median(samples)
        step_s[name] = propose_s[name][1]
        for length, bucket in ((short, slopes_lo), (long_ - k, slopes_hi)):
            prop.reset()
            prop.propose(ctx[:length], 1, GREEDY)
            bucket.append(statistics.median(prop.propose(ctx[: length + i], 1, GREEDY).seconds
                                            for i in range(1, min(repeats, k) + 1)))
        # Catch-up forwards: a few tokens after a switch, the whole context after a fresh load.
        ns = [n for n in (2, 8, 32, 128, 256, 512) if base + n <= len(ctx)] or [2, len(ctx) - base]
        ts = []
        for n in ns:
            samples = []
            for _ in range(max(3, repeats // 3)):
                prop.reset()
                prop.propose(ctx[:base], 1, GREEDY)
                samples.append(prop.propose(ctx[: base + n], 1, GREEDY).seconds)
            ts.append(statistics.median(samples))
        feed_s[name] = _fit_line(ns, ts)
        prop.reset()
    draft_slope = max(0.0, (float(np.mean(slopes_hi)) - float(np.mean(slopes_lo))) / max(1, long_ - k - short))
    lookup = NgramProposer(1)
    ngram_s = statistics.median(lookup.propose(ctx[: len(ctx) - i], k, GREEDY).seconds for i in range(repeats))
    cost = CostModel(verify_s=verify_s, verify_ref_len=base, verify_slope_s=verify_slope, step_slope_s=step_slope,
                     draft_slope_s=draft_slope,
                     draft_step_s=step_s, draft_feed_s=feed_s,
                     prefill_s=_fit_line(prefill_n, prefill_t), load_s=dict(load_s or {}), draft_propose_s=propose_s,
                     ngram_propose_s=ngram_s)
    if engine is not None and round_prompts:
        one, two, verify, ref_len = measure_round_costs(engine, proposers, round_prompts, k, max_new_tokens)
        for name in one:
            cost.draft_propose_s[name].update(one[name])
            cost.draft_propose2_s[name] = two[name]
        cost.verify_s.update(verify)
        cost.verify_ref_len = ref_len  # the slopes carry these figures to other context lengths
    return cost


def min_cost_model(models: Sequence[CostModel]) -> CostModel:
    """Element-wise minimum of repeated measurements (contention only ever adds time)."""
    first = models[0]
    d = asdict(first)

    def low(get):
        return min(get(m) for m in models)

    d["verify_s"] = {p: low(lambda m, p=p: m.verify_s[p]) for p in first.verify_s}
    d["draft_step_s"] = {n: low(lambda m, n=n: m.draft_step_s[n]) for n in first.draft_step_s}
    for key in ("draft_propose_s", "draft_propose2_s"):
        d[key] = {n: {p: min(getattr(m, key).get(n, {}).get(p, v) for m in models) for p, v in tab.items()}
                  for n, tab in getattr(first, key).items()}
    d["draft_feed_s"] = {n: min((m.draft_feed_s[n] for m in models), key=lambda ab: ab[0] + 100 * ab[1])
                         for n in first.draft_feed_s}
    d["prefill_s"] = min((m.prefill_s for m in models), key=lambda ab: ab[0] + 30 * ab[1])
    return CostModel(**d)


def measure_round_costs(engine, proposers: Mapping[str, object], prompts: Sequence[str], k: int,
                        max_new_tokens: int = 48) -> tuple[dict, dict, dict[int, float], int]:
    """Proposal and verification times from real engine rounds, per draft and proposal length.

    Microbenchmarks flatter a draft: in a real round its weights have just been pushed out of
    the CPU caches by the target's forward. So each draft decodes ``prompts`` for real, and
    the medians of its rounds are taken - separately for rounds that follow a fully accepted
    one (two new context tokens, fed as a full forward) and the rest. Rounds with catch-up
    (the first of each prompt) are left out; catch-up is modelled by the forward fit.
    Also returns the median context length of those rounds (the reference for the slopes).
    """
    one: dict[str, dict[int, list[float]]] = {}
    two: dict[str, dict[int, list[float]]] = {}
    verify: dict[int, list[float]] = {}
    lengths: list[int] = []
    for name, prop in proposers.items():
        one[name], two[name] = {}, {}
        for prompt in prompts:
            prop.reset()
            session = engine.start(prompt, max_new_tokens)
            prev_full = False
            while not session.done:
                lengths.append(len(session.token_ids))
                st = session.step(prop, k)
                verify.setdefault(st.proposed, []).append(st.verify_seconds)
                if st.proposed and not st.catchup_tokens:
                    (two if prev_full else one)[name].setdefault(st.proposed, []).append(st.draft_seconds)
                prev_full = st.proposed > 0 and st.accepted == st.proposed
        prop.reset()
    med = statistics.median
    return ({n: {p: med(v) for p, v in m.items()} for n, m in one.items()},
            {n: {p: med(v) for p, v in m.items() if len(v) >= 3} for n, m in two.items()},
            {p: med(v) for p, v in verify.items()}, int(med(lengths)))


def calibrate_overheads(cost: CostModel, reports: Sequence, stats) -> CostModel:
    """Set the bookkeeping constants from a real calibration run.

    ``reports`` are its :class:`GenerationReport` s and ``stats`` its ``RuntimeStats``.
    Per-round overhead = round wall time minus the engine's draft and verify time (median);
    per-turn overhead = turn wall time minus rounds, ticks and the modelled prefill; tick and
    predictor costs are means per call.
    """
    over, turn_over = [], []
    for rep in reports:
        rounds_s = 0.0
        for ev in rep.timeline:
            dur = ev.end - ev.start
            rounds_s += dur
            over.append(dur - ev.stall_s - ev.draft_s - ev.verify_s - ev.extra_s)
        turn_over.append(rep.wall_s - rounds_s - rep.tick_s - cost.prefill(rep.prompt_tokens))
    d = asdict(cost)
    d["round_overhead_s"] = float(statistics.median(over)) if over else 0.0
    d["turn_overhead_s"] = float(statistics.median(turn_over)) if turn_over else 0.0
    if stats.ticks:
        d["tick_s"] = max(0.0, (stats.tick_s - stats.predictor_s) / stats.ticks)
    if stats.predictor_calls:
        d["predictor_s"] = stats.predictor_s / stats.predictor_calls
    return CostModel(**d)
