"""``reactive``: follow the best recent acceptance estimate, loading on demand and waiting.

The obvious adaptive design: every check interval, pick the draft whose moving-average
acceptance is highest (drafts never tried count at an optimistic prior, so a collapsing draft
gets replaced), and if it is on storage, load it and wait.
"""

from __future__ import annotations

from .base import Decision, Policy, PolicyView, SchedulePlan, best_of, stall_choice, stall_plan


class ReactivePolicy(Policy):
    """Greedy on moving-average acceptance; stalls for loads."""

    name = "reactive"

    def __init__(self, prior: float = 0.25, margin: float = 0.05) -> None:
        super().__init__()
        self.prior = prior
        self.margin = margin
        self.selected: str | None = None

    def _scores(self, view: PolicyView) -> dict[str, float]:
        return {n: view.acceptance.ema(n, self.prior) for n in view.usable()}

    def _choose(self, view: PolicyView) -> Decision:
        if self.selected is None:
            self.selected = best_of(view.resident, self._scores(view), prefer=view.active)
        return stall_choice(view, self.selected, self._scores(view))

    def _plan(self, view: PolicyView) -> SchedulePlan:
        scores = self._scores(view)
        self.selected = best_of(view.usable(), scores, prefer=self.selected or view.active, margin=self.margin)
        return stall_plan(view, self.selected, scores)
