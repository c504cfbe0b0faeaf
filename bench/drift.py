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

from collections.abc import Iterable, Sequence

from memspec_ros.runtime import CostModel, GenerationReport


def compute_drift(cost: CostModel, runs: Iterable[Sequence[GenerationReport]]) -> float | None:
    """Measured over modelled draft-plus-verify seconds of the same rounds (None: no rounds)."""
    real = modelled = 0.0
    for reports in runs:
        for report in reports:
            for ev in report.timeline:
                real += ev.draft_s + ev.verify_s
                if ev.draft is not None and ev.proposed > 0:
                    modelled += cost.propose_s(ev.draft, ev.proposed, ev.catchup_tokens + 1)
                modelled += cost.verify(ev.proposed)
    return real / modelled if modelled > 0 else None
