"""``hedge``: full-information selection in the manner of HedgeSpec.

HedgeSpec scores every draft counterfactually on the tokens the target verified, so it learns
about drafts that did not run. Under a memory budget only *resident* drafts can be scored (the
others are not in memory), so each round the runtime asks every other resident draft what it
would have proposed and counts how many of the verified tokens it would have matched; that
extra draft work is part of this policy's cost. Selection follows exponential weights;
switching to a non-resident draft means loading it on demand and waiting.
"""

from __future__ import annotations

import math

from .base import Decision, Policy, PolicyView, RoundFeedback, SchedulePlan, best_of, stall_choice, stall_plan


class HedgePolicy(Policy):
    """Exponential weights over counterfactual acceptance; stalls for loads."""

    name = "hedge"
    wants_counterfactual = True

    def __init__(self, eta: float = 2.0, share: float = 0.02, margin: float = 0.1,
                 reference: float = 0.25) -> None:
        super().__init__()
        self.eta = eta
        self.reference = reference
        self.share = share
        self.margin = margin
        self.selected: str | None = None
        self._logw: dict[str, float] = {}

    def _on_bind(self) -> None:
        assert self.catalogue is not None
        self._logw = dict.fromkeys(self.catalogue.names, 0.0)

    def _observe(self, feedback: RoundFeedback, view: PolicyView) -> None:
        if feedback.draft is None or feedback.proposed <= 0:
            return
        rewards = {feedback.draft: feedback.accepted / feedback.proposed}
        for name, acc in (feedback.counterfactual or {}).items():
            rewards[name] = acc / feedback.proposed
        # Drafts not scored (not in memory) keep their weight; scored ones move relative to a
        # reference acceptance, so a draft that collapses sinks below the unscored ones.
        for name, r in rewards.items():
            self._logw[name] += self.eta * (r - self.reference)
        for name in self._logw:
            self._logw[name] *= 1.0 - self.share  # fixed share: decay toward uniform

    def _choose(self, view: PolicyView) -> Decision:
        if self.selected is None:
            self.selected = best_of(view.resident, self._logw, prefer=view.active)
        return stall_choice(view, self.selected, self._logw)

    def _plan(self, view: PolicyView) -> SchedulePlan:
        arms = view.usable()
        self.selected = best_of(arms, self._logw, prefer=self.selected or view.active, margin=self.margin)
        probs = self._probs(arms)
        return stall_plan(view, self.selected, probs)

    def _probs(self, arms: list[str]) -> dict[str, float]:
        if not arms:
            return {}
        m = max(self._logw[a] for a in arms)
        w = {a: math.exp(self._logw[a] - m) for a in arms}
        z = sum(w.values())
        return {a: w[a] / z for a in arms}
