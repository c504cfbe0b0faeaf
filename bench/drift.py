"""What the runtime's real rounds cost against the cost model, apart from the machine's speed.

The cost model is calibrated in the first minute of a run; the headline's real runs take the
next ten or twenty, and this machine's speed moves by 10-25% in that time (seconds-long slow
spells too: runs of one session block, a minute apart, differed by up to 19%). Two things are
therefore measured separately:

* the machine's speed during each run (:func:`verification_speed`): how much slower than the
  cost model the run's own target verifications ran, outside loads. A target forward pass is
  the yardstick because every configuration runs them and no policy chooses their cost; the
  run's own ones measure the seconds the run actually had, where probes between runs (the
  earlier yardstick, :mod:`bench.speed_probe`, still reported beside it) missed slow spells of a
  few seconds by up to 10% either way;
* the drift: real over modelled seconds of exactly the same rounds (draft, proposal length,
  catch-up, context), each run's seconds first divided by its speed, pooled over every policy's
  real runs, separately for verification, each draft, and rounds during a load. What remains is
  what running inside the runtime costs beyond the isolated measurements (draft and target
  taking turns in the CPU caches, the loader's reads), the same for every run.

A run is then simulated with the drift at its own speed (:meth:`Drift.at_speed`); loads are
storage-paced wall time and stay as calibrated. What the simulator validation checks is the
policies' behaviour - which drafts, how many rounds and proposals, draft time, stalls, loads,
overheads - not the machine's speed in a given second.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from memspec_ros.runtime import CostModel, GenerationReport


@dataclass(frozen=True)
class Drift:
    """Measured over modelled seconds of the same rounds: verification, each draft's proposals, all."""

    verify: float
    drafts: dict[str, float] = field(default_factory=dict)
    overall: float = 1.0
    loading: float = 1.0
    """Rounds that ran while a draft was loading, measured over modelled, relative to the others:
    the loader's CPU work slows the decoding thread (a policy that loads a lot pays for it)."""
    other: float = 1.0
    """Time outside the rounds (prefill, per-turn and per-round bookkeeping, ticks, the predictor),
    real over simulated at the same speed: the runs' speed is read from their verifications, which
    draft steps slow down (the two models take turns in the CPU caches) while Python bookkeeping
    does not, so bookkeeping scaled by that speed alone comes out too long (:func:`other_factor`)."""

    def at_speed(self, speed: float) -> Drift:
        """This drift on a machine running ``speed`` times slower than when the cost model was measured
        (a run's verifications or a speed probe, :mod:`bench.speed_probe`): every compute factor scaled by it."""
        drafts = {d: x * speed for d, x in self.drafts.items()}
        return dataclasses.replace(self, verify=self.verify * speed, drafts=drafts, overall=self.overall * speed)

    def apply(self, cost: CostModel) -> CostModel:
        """``cost`` with the target's compute (and overheads) scaled by ``verify``, each draft's by its own
        factor, rounds during loads by ``loading``, and time outside rounds further by ``other``."""
        scaled = cost.compute_scaled(self.verify, self.drafts)
        o = self.other
        return dataclasses.replace(scaled, loading_factor=self.loading,
                                   prefill_s=(scaled.prefill_s[0] * o, scaled.prefill_s[1] * o),
                                   round_overhead_s=scaled.round_overhead_s * o,
                                   turn_overhead_s=scaled.turn_overhead_s * o, tick_s=scaled.tick_s * o,
                                   predictor_s=scaled.predictor_s * o)


def compute_drift(cost: CostModel, runs: Sequence[Sequence[GenerationReport]],
                  speeds: Sequence[float] | None = None) -> Drift | None:
    """Per component, measured over modelled seconds of the same rounds (None: no rounds).

    Components are kept apart because they drift apart: a draft's steps are a few small
    operators, a verification a few large ones, and other work on the machine slows them
    differently. ``speeds[i]``, if given, is how much slower the machine ran during run ``i``
    than at calibration (its speed probes): that run's seconds are divided by it first, so the
    drift keeps only what the runtime itself costs and :meth:`Drift.at_speed` puts any run's
    machine speed back.
    """
    real_verify = model_verify = 0.0
    real_draft: dict[str, float] = defaultdict(float)
    model_draft: dict[str, float] = defaultdict(float)
    real_by_load = {True: 0.0, False: 0.0}
    model_by_load = {True: 0.0, False: 0.0}
    for i, reports in enumerate(runs):
        slow = speeds[i] if speeds is not None and speeds[i] > 0 else 1.0
        for report in reports:
            for ev in report.timeline:
                # Charged as the simulator charges the same round (trace_rounds.py): at its context.
                modelled = cost.verify(ev.proposed, ev.context_tokens)
                real_verify += ev.verify_s / slow
                model_verify += modelled
                if ev.draft is not None and ev.proposed > 0:
                    proposal = cost.propose_at(ev.draft, ev.proposed, ev.catchup_tokens + 1, ev.context_tokens)
                    real_draft[ev.draft] += ev.draft_s / slow
                    model_draft[ev.draft] += proposal
                    modelled += proposal
                loading = ev.load_in_flight  # the simulator's criterion too (trace_rounds.py)
                real_by_load[loading] += (ev.draft_s + ev.verify_s) / slow
                model_by_load[loading] += modelled
    if model_verify <= 0:
        return None
    drafts = {d: real_draft[d] / model_draft[d] for d in model_draft if model_draft[d] > 0}
    overall = (real_verify + sum(real_draft.values())) / (model_verify + sum(model_draft.values()))
    loading = 1.0
    if model_by_load[True] > 0 and model_by_load[False] > 0 and real_by_load[False] > 0:
        loading = max(1.0, (real_by_load[True] / model_by_load[True]) / (real_by_load[False] / model_by_load[False]))
    return Drift(verify=real_verify / model_verify, drafts=drafts, overall=overall, loading=loading)


def verification_speed(cost: CostModel, reports: Sequence[GenerationReport]) -> float | None:
    """How much slower than ``cost`` the machine ran the target during one run: real over modelled
    seconds of the run's verifications that had no load beside them (each at its proposal length
    and context, as the simulator charges it). None: the run has no such round.

    Rounds during a load are left out because how much a load slows them is policy behaviour
    (:attr:`Drift.loading`), which the simulator must reproduce, not absorb.
    """
    real = modelled = 0.0
    for report in reports:
        for ev in report.timeline:
            if not ev.load_in_flight:
                real += ev.verify_s
                modelled += cost.verify(ev.proposed, ev.context_tokens)
    return real / modelled if real > 0 and modelled > 0 else None


def outside_rounds_s(reports: Sequence[GenerationReport]) -> float:
    """Seconds of a run's turns outside its rounds' draft, verification and extra work and its stalls:
    prefill, per-turn and per-round bookkeeping, ticks and the predictor. The same for a real run's
    reports and a simulated one's, which have the same fields."""
    return sum(r.wall_s - r.stall_s - sum(ev.draft_s + ev.verify_s + ev.extra_s for ev in r.timeline) for r in reports)


def other_factor(real: Sequence[Sequence[GenerationReport]], simulated: Sequence[Sequence[GenerationReport]]) -> float:
    """:attr:`Drift.other`: real over simulated seconds outside rounds, pooled over runs simulated
    at their own speed with ``other`` = 1 (1.0 when there is nothing to compare)."""
    r = sum(outside_rounds_s(x) for x in real)
    s = sum(outside_rounds_s(x) for x in simulated)
    return r / s if r > 0 and s > 0 else 1.0
