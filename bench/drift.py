"""How much slower or faster the machine ran the headline than when the cost model was measured.

The cost model is calibrated in the first minute of a run; the headline's real runs take the
next ten. On a shared or thermally throttled machine the speed moves in between (this machine's
runs have shown -10% and +33% common offsets between simulated and real tokens/s, with a spread
of only 4-6% across policies). The real runs record every round's measured draft and
verification seconds, so the drift is measured where it matters: the ratio of those seconds to
what the cost model charges for exactly the same rounds (draft, proposal length, catch-up),
pooled over every policy's real runs. Simulations after the headline use the cost model scaled
by it (:meth:`~memspec_ros.runtime.CostModel.compute_scaled`); loads are storage-paced wall time
and stay as calibrated. What the simulator validation then checks is the policies' behaviour -
which drafts, how many rounds, stalls, loads, overheads - against per-operation costs of the
same minutes, not the machine's speed at calibration.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence
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
    sessions: tuple[float, ...] = ()
    """Per session block of the headline (every configuration's run of one session, back to back):
    that block's overall factor relative to :attr:`overall` - how the machine's speed moved during
    the run. :meth:`for_session` applies it."""

    def for_session(self, i: int) -> Drift:
        """This drift at the machine speed of session block ``i``: every compute factor scaled by that
        block's speed relative to the whole run's (the components' ratios stay the whole run's: one
        session's rounds of a rarely used draft are too few to measure it alone)."""
        if i >= len(self.sessions):
            return self
        f = self.sessions[i]
        return Drift(verify=self.verify * f, drafts={d: x * f for d, x in self.drafts.items()},
                     overall=self.overall * f, loading=self.loading)

    def apply(self, cost: CostModel) -> CostModel:
        """``cost`` with the target's compute (and overheads) scaled by ``verify``, each draft's by its own
        factor, and rounds during loads by ``loading``."""
        return dataclasses.replace(cost.compute_scaled(self.verify, self.drafts), loading_factor=self.loading)


def compute_session_drift(cost: CostModel, blocks: Sequence[Sequence[Sequence[GenerationReport]]]) -> Drift | None:
    """:func:`compute_drift` over every block's runs, with each block's relative speed in ``sessions``.

    ``blocks[i]`` holds the runs of session ``i`` (every policy's reports of that session). The
    headline rotates the configurations' order per session but runs a session's configurations
    back to back, so a block is a stretch of wall time: a slow spell of the machine shows in one
    block's factor and is charged to the simulation of that session only, for every policy alike.
    """
    whole = compute_drift(cost, [run for block in blocks for run in block])
    if whole is None:
        return None
    factors = []
    for block in blocks:
        part = compute_drift(cost, block)
        factors.append(part.overall / whole.overall if part is not None else 1.0)
    return dataclasses.replace(whole, sessions=tuple(factors))


def compute_drift(cost: CostModel, runs: Iterable[Sequence[GenerationReport]]) -> Drift | None:
    """Per component, measured over modelled seconds of the same rounds (None: no rounds).

    Components are kept apart because they drift apart: a draft's steps are a few small
    operators, a verification a few large ones, and other work on the machine slows them
    differently.
    """
    real_verify = model_verify = 0.0
    real_draft: dict[str, float] = defaultdict(float)
    model_draft: dict[str, float] = defaultdict(float)
    real_by_load = {True: 0.0, False: 0.0}
    model_by_load = {True: 0.0, False: 0.0}
    for reports in runs:
        for report in reports:
            for ev in report.timeline:
                # Charged as the simulator charges the same round (trace_rounds.py): at its context.
                modelled = cost.verify(ev.proposed, ev.context_tokens)
                real_verify += ev.verify_s
                model_verify += modelled
                if ev.draft is not None and ev.proposed > 0:
                    proposal = cost.propose_at(ev.draft, ev.proposed, ev.catchup_tokens + 1, ev.context_tokens)
                    real_draft[ev.draft] += ev.draft_s
                    model_draft[ev.draft] += proposal
                    modelled += proposal
                loading = ev.load_in_flight  # the simulator's criterion too (trace_rounds.py)
                real_by_load[loading] += ev.draft_s + ev.verify_s
                model_by_load[loading] += modelled
    if model_verify <= 0:
        return None
    drafts = {d: real_draft[d] / model_draft[d] for d in model_draft if model_draft[d] > 0}
    overall = (real_verify + sum(real_draft.values())) / (model_verify + sum(model_draft.values()))
    loading = 1.0
    if model_by_load[True] > 0 and model_by_load[False] > 0 and real_by_load[False] > 0:
        loading = max(1.0, (real_by_load[True] / model_by_load[True]) / (real_by_load[False] / model_by_load[False]))
    return Drift(verify=real_verify / model_verify, drafts=drafts, overall=overall, loading=loading)
