"""Experiment 7, scaling: catalogue size and dialogue length (simulated; scheduling costs measured).

A robot product may ship dozens of drafts (per language, per task), and a dialogue may run to
the context window. Two questions: does scheduling stay cheap, and does the speed-up hold?

* **Catalogue size** (6, 24, 96 drafts): the bundled drafts plus *relabelled, perturbed copies*
  - each copy has its original's size, load time and step costs, an acceptance trace with 5%
  of its positions flipped (seeded), and its original's predictor column with a little noise on
  the bias - so a larger catalogue has more near-equal candidates, as a real one would. 96
  real drafts cannot be trained here; the copies make the scheduling problem as large.
* **Dialogue length**: the workload's turns chained into one conversation until the target's
  context window is nearly full, so every round sees a longer context than the last.

The rounds are simulated (exact traces, calibrated cost model), but the costs that grow with
the catalogue are *measured wall time* of the real code: the predictor (forecast and online
adaptation, :attr:`DraftPredictor.seconds`) and the whole per-round runtime work of the
simulation (policy, scheduler, pool, trackers, predictor and trace replay; an upper bound on
the scheduling cost). The predictor's share is its time per round over the real mean round
measured at calibration.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memspec_ros.runtime import Catalogue, CostModel, DraftPredictor, GenerationReport, Simulator, make_policy
from memspec_ros.runtime.policies import policy_class
from memspec_ros.runtime.traces import DialogueTrace, TurnTrace

from .trace_cache import DialogueTraces

if TYPE_CHECKING:
    from .experiments import Bench

CATALOGUE_SIZES = (6, 24, 96)
SCALING_POLICIES = ("memspec", "memspec-manage-only", "reactive", "ucb-resident")
FLIP_RATE = 0.05
LENGTH_BUCKETS = 4


@dataclasses.dataclass(frozen=True)
class ScaledModels:
    """A catalogue of ``n`` drafts with matching traces, predictor and costs."""

    catalogue: Catalogue
    traces: list[DialogueTraces]
    predictor: DraftPredictor
    cost: CostModel


def scaled_models(catalogue: Catalogue, traces: Sequence[DialogueTraces], predictor: DraftPredictor,
                  cost: CostModel, n: int, seed: int = 0) -> ScaledModels:
    """The bundled catalogue grown to ``n`` drafts with relabelled, perturbed copies (see module doc)."""
    rng = np.random.default_rng(seed)
    originals = catalogue.names
    source = {name: name for name in originals}
    for i in range(n - len(originals)):
        source[f"{originals[i % len(originals)]}~{i // len(originals) + 1}"] = originals[i % len(originals)]
    specs = [dataclasses.replace(catalogue.get(src), name=name, domain=name) if name != src else catalogue.get(src)
             for name, src in source.items()]

    def grown_turn(turn: TurnTrace) -> TurnTrace:  # one seeded stream, drawn in a fixed order
        match = {}
        for name, src in source.items():
            m = turn.match[src]
            match[name] = m if name == src else m ^ (rng.random(len(m)) < FLIP_RATE)
        return dataclasses.replace(turn, match=match)

    grown = [DialogueTraces(tr.name, [DialogueTrace(c.name, [grown_turn(t) for t in c.turns])
                                      for c in tr.conversations]) for tr in traces]
    idx = [originals.index(src) for src in source.values()]
    noise = np.where(np.array([name != src for name, src in source.items()]),
                     rng.normal(0.0, 0.05, len(source)), 0.0).astype(np.float32)
    pred = DraftPredictor(list(source), predictor.hidden_size, predictor.weight[:, idx], predictor.bias[idx] + noise,
                          predictor.mean, predictor.std, buckets=predictor.buckets, meta=predictor.meta)

    def per_draft(values: dict) -> dict:
        return {name: values[src] for name, src in source.items() if src in values}

    scaled_cost = dataclasses.replace(
        cost, draft_step_s=per_draft(cost.draft_step_s), draft_feed_s=per_draft(cost.draft_feed_s),
        draft_propose_s=per_draft(cost.draft_propose_s), draft_propose2_s=per_draft(cost.draft_propose2_s),
        load_s=per_draft(cost.load_s))
    return ScaledModels(Catalogue(specs), grown, pred, scaled_cost)


@dataclasses.dataclass
class _Tally:
    tokens: int = 0
    virtual_s: float = 0.0
    rounds: int = 0
    predictor_s: float = 0.0
    wall_s: float = 0.0

    def row(self, round_s: float) -> dict[str, float | None]:
        per_round = self.predictor_s / self.rounds if self.rounds else None
        return {"tokens_per_s": self.tokens / self.virtual_s if self.virtual_s else 0.0,
                "predictor_us_per_round": per_round * 1e6 if per_round is not None else None,
                "runtime_us_per_round": self.wall_s / self.rounds * 1e6 if self.rounds else None,
                "predictor_share": per_round / round_s if per_round is not None and round_s else None}


def _simulate(models: ScaledModels, policy_name: str, bench: Bench, conversations: Sequence[DialogueTrace],
              tally_for: Callable[[int], _Tally]) -> None:
    """Run a fresh policy over ``conversations``; each turn's figures go to ``tally_for(context at its start)``."""
    predictor = copy.deepcopy(models.predictor)
    policy = make_policy(policy_name, predictor=predictor if policy_class(policy_name).needs_predictor else None)
    sim = Simulator(models.catalogue, bench.budget, policy, models.cost, bench.runtime_config())
    sim.warm_up()
    for conversation in conversations:
        starts = list(itertools.accumulate((len(t.prompt_ids) + len(t.output_ids) - t.rewind
                                            for t in conversation.turns), initial=0))
        mark = [time.perf_counter(), predictor.seconds]

        def on_report(i: int, report: GenerationReport, _starts: list[int] = starts, mark: list = mark) -> None:
            tally = tally_for(_starts[i])
            tally.tokens += report.tokens
            tally.virtual_s += report.wall_s
            tally.rounds += report.rounds
            tally.wall_s += time.perf_counter() - mark[0]
            tally.predictor_s += predictor.seconds - mark[1]
            mark[:] = [time.perf_counter(), predictor.seconds]

        sim.run(conversation, on_report=on_report)


def catalogue_scaling(bench: Bench, sizes: Sequence[int] = CATALOGUE_SIZES) -> dict[str, Any]:
    """Tokens/s and measured per-round scheduling costs of each policy at each catalogue size."""
    tb, cost = bench.testbed, bench.calibration.cost
    predictor = DraftPredictor.load(tb.predictor_path, tb.catalogue.names)
    out: dict[str, Any] = {"values": list(sizes), "policies": {}}
    for n in sizes:
        models = scaled_models(tb.catalogue, bench.traces, predictor, cost, max(n, len(tb.catalogue)), bench.cfg.seed)
        for name in SCALING_POLICIES:
            tally = _Tally()
            for traces in models.traces:
                _simulate(models, name, bench, traces.conversations, lambda _context, _t=tally: _t)
            row = tally.row(bench.calibration.round_s)
            entry = out["policies"].setdefault(name, {k: [] for k in row})
            for key, value in row.items():
                entry[key].append(value)
    return out


def dialogue_length_scaling(bench: Bench, n_drafts: int = CATALOGUE_SIZES[-1]) -> dict[str, Any]:
    """One conversation chained from every turn of the workload up to the context window, by context quarter."""
    tb, cost = bench.testbed, bench.calibration.cost
    window = tb.engine.max_context
    turns: list[TurnTrace] = []
    used = 0
    for traces in bench.traces:
        for turn in traces.turns:
            size = len(turn.prompt_ids) + len(turn.output_ids)
            if used + size > window:
                break
            turns.append(turn)
            used += size
    predictor = DraftPredictor.load(tb.predictor_path, tb.catalogue.names)
    long = DialogueTraces("long", [DialogueTrace("long", turns)])
    models = scaled_models(tb.catalogue, [long], predictor, cost, max(n_drafts, len(tb.catalogue)), bench.cfg.seed)
    edges = [window * (i + 1) / LENGTH_BUCKETS for i in range(LENGTH_BUCKETS)]
    out: dict[str, Any] = {"context_window": window, "context_used": used, "drafts": len(models.catalogue),
                           "bucket_upper_tokens": [int(e) for e in edges], "policies": {}}
    for name in ("memspec", "ucb-resident"):
        tallies = [_Tally() for _ in edges]

        def bucket(context: int, _t=tallies) -> _Tally:
            return _t[min(LENGTH_BUCKETS - 1, int(context * LENGTH_BUCKETS / window))]

        _simulate(models, name, bench, models.traces[0].conversations, bucket)
        rows = [t.row(bench.calibration.round_s) for t in tallies]
        out["policies"][name] = {key: [r[key] for r in rows] for key in rows[0]}
    return out
