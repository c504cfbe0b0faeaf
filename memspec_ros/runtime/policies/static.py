"""``static``: one fixed draft for the whole run, as single-draft systems do."""

from __future__ import annotations

from memspec_ros.core.ngram_proposer import NGRAM_NAME

from .base import Decision, Policy, PolicyView, SchedulePlan


class StaticPolicy(Policy):
    """Always the same draft (default: the generalist). Never loads anything else.

    ``draft`` may name the n-gram member (:data:`~memspec_ros.core.ngram_proposer.NGRAM_NAME`):
    prompt lookup alone, with no model draft loaded (rounds are target-only while the runtime
    has the member off).
    """

    name = "static"

    def __init__(self, draft: str | None = None) -> None:
        super().__init__()
        self.draft = draft

    def _on_bind(self) -> None:
        assert self.catalogue is not None
        if self.draft is None:
            general = [s.name for s in self.catalogue if s.domain in ("mixed", "general")]
            self.draft = general[0] if general else self.catalogue.names[0]
        if self.draft != NGRAM_NAME:
            self.catalogue.get(self.draft)  # unknown names fail at bind time

    def initial_working_set(self) -> list[str]:
        """Just the fixed draft."""
        return [self.draft] if self.draft and self.draft != NGRAM_NAME else []

    def _choose(self, view: PolicyView) -> Decision:
        if self.draft == NGRAM_NAME:
            return Decision(view.ngram)
        if self.draft in view.unusable:
            return Decision(None)
        return Decision(self.draft, wait=not view.is_resident(self.draft))

    def _plan(self, view: PolicyView) -> SchedulePlan:
        if self.draft in view.unusable or self.draft == NGRAM_NAME:
            return SchedulePlan()
        return SchedulePlan(want=(self.draft,), urgent=not view.is_resident(self.draft))
