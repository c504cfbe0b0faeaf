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

    def apply(self, cost: CostModel) -> CostModel:
        """``cost`` with the target's compute (and overheads) scaled by ``verify``, each draft's by its own
        factor, and rounds during loads by ``loading``."""
        return dataclasses.replace(cost.compute_scaled(self.verify, self.drafts), loading_factor=self.loading)


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
