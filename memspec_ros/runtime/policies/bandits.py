"""``ucb``, ``exp3`` and ``ucb-resident``: bandit selection over drafts in the manner of BanditSpec.

BanditSpec (UCBSpec, EXP3Spec) treats each draft as an arm and the acceptance it earns as
the reward. Only the draft that ran is observed (bandit feedback). Here an arm is pulled for a
segment of ``check_interval`` rounds; the reward of a round is accepted/proposed. A chosen
draft that is on storage is loaded on demand and waited for; room is made by evicting the
least recently used draft. Both use discounting (older rewards fade) because the best arm
moves with the topic; without it a bandit locks onto the first domain's draft.
"""

from __future__ import annotations

import dataclasses
import math
import random

from .base import (
    Decision,
    Policy,
    PolicyView,
    RoundFeedback,
    SchedulePlan,
    best_of,
    lru_victims,
    stall_choice,
    stall_plan,
)


class UCBPolicy(Policy):
    """Discounted UCB1 over drafts; stalls for loads."""

    name = "ucb"

    def __init__(self, exploration: float = 1.0, discount: float = 0.98) -> None:
        super().__init__()
        self.exploration = exploration
        self.discount = discount
        self.selected: str | None = None
        self._n: dict[str, float] = {}
        self._s: dict[str, float] = {}

    def _on_bind(self) -> None:
        assert self.catalogue is not None
        self._n = dict.fromkeys(self.catalogue.names, 0.0)
        self._s = dict.fromkeys(self.catalogue.names, 0.0)

    def _index(self, name: str, total: float) -> float:
        n = self._n[name]
        if n < 1e-9:
            return math.inf
        return self._s[name] / n + self.exploration * math.sqrt(2.0 * math.log(max(total, 1.0 + 1e-9)) / n)

    def _means(self) -> dict[str, float]:
        return {a: (self._s[a] / self._n[a]) if self._n[a] > 0 else 0.0 for a in self._n}

    def _observe(self, feedback: RoundFeedback, view: PolicyView) -> None:
        if feedback.draft is None or feedback.proposed <= 0:
            return
        for a in self._n:
            self._n[a] *= self.discount
            self._s[a] *= self.discount
        self._n[feedback.draft] += 1.0
        self._s[feedback.draft] += feedback.accepted / feedback.proposed

    def _choose(self, view: PolicyView) -> Decision:
        if self.selected is None:
            self._select(view)
        return stall_choice(view, self.selected, self._means())

    def _select(self, view: PolicyView) -> None:
        arms = view.usable()
        if not arms:
            self.selected = None
            return
        total = sum(self._n[a] for a in arms)
        # Ties (e.g. several untried arms) go to a resident draft, then catalogue order.
        self.selected = max(arms, key=lambda a: (self._index(a, total), view.is_resident(a)))

    def _plan(self, view: PolicyView) -> SchedulePlan:
        self._select(view)
        return stall_plan(view, self.selected, self._means())


class EXP3Policy(Policy):
    """EXP3 with a little fixed share, sampling a draft per segment; stalls for loads.

    The random generator is seeded, so a run (and its simulation) is reproducible.
    """

    name = "exp3"

    def __init__(self, gamma: float = 0.2, share: float = 0.01, seed: int = 0) -> None:
        super().__init__()
        self.gamma = gamma
        self.share = share
        self.selected: str | None = None
        self._rng = random.Random(seed)
        self._logw: dict[str, float] = {}
        self._p: dict[str, float] = {}
        self._seg_reward = 0.0
        self._seg_rounds = 0

    def _on_bind(self) -> None:
        assert self.catalogue is not None
        self._logw = dict.fromkeys(self.catalogue.names, 0.0)

    def _probs(self, arms: list[str]) -> dict[str, float]:
        m = max(self._logw[a] for a in arms)
        w = {a: math.exp(self._logw[a] - m) for a in arms}
        z = sum(w.values())
        return {a: (1 - self.gamma) * w[a] / z + self.gamma / len(arms) for a in arms}

    def _observe(self, feedback: RoundFeedback, view: PolicyView) -> None:
        if feedback.draft is not None and feedback.draft == self.selected and feedback.proposed > 0:
            self._seg_reward += feedback.accepted / feedback.proposed
            self._seg_rounds += 1

    def _close_segment(self, arms: list[str]) -> None:
        if self.selected is None or self._seg_rounds == 0 or self.selected not in self._p:
            return
        reward = self._seg_reward / self._seg_rounds
        est = reward / self._p[self.selected]
        self._logw[self.selected] += self.gamma * est / max(1, len(arms))
        # Fixed share: mix a little weight back to every arm so none is forgotten for good.
        m = max(self._logw[a] for a in arms)
        w = {a: math.exp(self._logw[a] - m) for a in arms}
        z = sum(w.values())
        for a in arms:
            self._logw[a] = math.log((1 - self.share) * w[a] / z + self.share / len(arms))
        self._seg_reward = 0.0
        self._seg_rounds = 0

    def _choose(self, view: PolicyView) -> Decision:
        if self.selected is None:
            self._select(view)
        return stall_choice(view, self.selected, self._p)

    def _select(self, view: PolicyView) -> None:
        arms = view.usable()
        if not arms:
            self.selected = None
            return
        self._close_segment(arms)
        self._p = self._probs(arms)
        r = self._rng.random()
        acc = 0.0
        self.selected = arms[-1]
        for a in arms:
            acc += self._p[a]
            if r < acc:
                self.selected = a
                break

    def _plan(self, view: PolicyView) -> SchedulePlan:
        self._select(view)
        return stall_plan(view, self.selected, self._p)


class UCBResidentPolicy(Policy):
    """Discounted UCB under a memory budget: a "no draft" arm, resident arms only, background loads.

    What a bandit from the literature would do if it had to live in our memory budget, so that
    MemSpec is compared with the strongest version of the idea rather than a naive one:

    * the arms are the drafts *and* "no draft" (a target-only round), so the bandit can learn
      that drafting does not pay on a topic no resident draft covers;
    * the reward of a round is its speed-up over a target-only step, scaled to about [0, 1]:
      ``emitted * target_step_s / seconds / (k + 1)`` - accepted tokens alone would always
      prefer drafting, whatever it costs. ``seconds`` is what such a round costs by the
      runtime's moving averages (proposed tokens times the draft's step, plus a verification;
      a target step for "no draft"), not the round's own wall time: one round's time carries
      the machine's jitter of a few milliseconds, which would make the rewards of arms a few
      percent apart a coin toss (the round's own time is used until the averages exist);
    * each segment it runs the best arm among those usable *now* (resident drafts and "no
      draft") and never waits; if the best arm overall is a draft on storage, it is loaded in
      the background, evicting the least recently used other draft, and taken up once resident;
    * where the runtime has the n-gram member (``view.ngram``), it is one more arm, always
      usable: a segment that selected it runs it on every round its lookup matches and plain
      target steps otherwise, and every round of that segment is its reward (what selecting it
      is worth, not only its rounds with a match).
    """

    name = "ucb-resident"

    def __init__(self, exploration: float = 0.1, discount: float = 0.98) -> None:
        """``exploration`` is matched to the rewards' spread: arms' rewards lie a few hundredths apart
        (a target step scores 1/(k+1) = 0.2, a useful draft 0.25-0.4), and at 0.5 the exploration
        bonus drowned that, so the bandit spread its rounds almost evenly over the arms. A
        simulated sweep on the bundled zoo's full benchmark workload (2026-12-01) gave 128, 132,
        135, 142, 136 and 128 tok/s at 0.5, 0.3, 0.2, 0.1, 0.05 and 0.02."""
        super().__init__()
        self.exploration = exploration
        self.discount = discount
        self.selected: str | None = None
        self._n: dict[str | None, float] = {}
        self._s: dict[str | None, float] = {}
        self._chosen_once = False

    def _on_bind(self) -> None:
        assert self.catalogue is not None
        arms: list[str | None] = [*self.catalogue.names, None]
        self._n = dict.fromkeys(arms, 0.0)
        self._s = dict.fromkeys(arms, 0.0)

    def _index(self, arm: str | None, total: float) -> float:
        n = self._n[arm]
        if n < 1e-9:
            return float("inf")
        return self._s[arm] / n + self.exploration * math.sqrt(2.0 * math.log(max(total, 1.0 + 1e-9)) / n)

    def _means(self) -> dict[str, float]:
        """Mean reward of each draft arm (what residency messages publish as its forecast)."""
        assert self.catalogue is not None
        return {a: (self._s[a] / self._n[a]) if self._n[a] > 0 else 0.0 for a in self.catalogue.names}

    def _arm(self, view: PolicyView) -> None:
        """Give the n-gram member an arm the first time the view shows it."""
        if view.ngram is not None and view.ngram not in self._n:
            self._n[view.ngram] = self._s[view.ngram] = 0.0

    def _observe(self, feedback: RoundFeedback, view: PolicyView) -> None:
        self._arm(view)
        if feedback.draft is None and view.ngram is not None and self.selected == view.ngram:
            feedback = dataclasses.replace(feedback, draft=view.ngram)  # its segment's round without a match
        if feedback.seconds <= 0 or feedback.draft not in self._n:
            return
        acc = view.acceptance
        step = acc.target_step_s or acc.verify_s or feedback.seconds
        seconds = feedback.seconds
        if feedback.draft is None:
            seconds = acc.target_step_s or seconds
        elif feedback.draft in acc.step_s and acc.verify_s:
            seconds = feedback.proposed * acc.step_s[feedback.draft] + acc.verify_s
        reward = min(1.0, feedback.emitted * step / seconds / (view.k + 1))
        for a in self._n:
            self._n[a] *= self.discount
            self._s[a] *= self.discount
        self._n[feedback.draft] += 1.0
        self._s[feedback.draft] += reward

    def _ranked(self, view: PolicyView) -> list[str | None]:
        self._arm(view)
        arms: list[str | None] = [*view.usable(), None, *([view.ngram] if view.ngram is not None else [])]
        total = sum(self._n[a] for a in arms)

        def where(arm: str | None) -> int:  # ties: a resident draft, then none, then one to load
            return 1 if arm is None or arm == view.ngram else (0 if view.is_resident(arm) else 2)

        return sorted(arms, key=lambda a: (-self._index(a, total), where(a), a != view.active))

    def _usable_now(self, arm: str | None, view: PolicyView) -> bool:
        return arm is None or arm == view.ngram or view.is_resident(arm)

    def _select(self, view: PolicyView) -> str | None:
        ranked = self._ranked(view)
        self.selected = next(a for a in ranked if self._usable_now(a, view))
        self._chosen_once = True
        return ranked[0]

    def _choose(self, view: PolicyView) -> Decision:
        if not self._chosen_once:
            self._select(view)
        if self.selected is not None and self.selected == view.ngram:
            return Decision(view.ngram if view.ngram_match > 0 else None)
        if self.selected is not None and not view.is_resident(self.selected):
            means = self._means()
            return Decision(best_of([n for n in view.resident if n not in view.unusable], means, prefer=view.active))
        return Decision(self.selected)

    def _plan(self, view: PolicyView) -> SchedulePlan:
        best = self._select(view)
        want = tuple(a for a in dict.fromkeys((self.selected, best)) if a is not None and a != view.ngram)
        cancel = tuple(p for p in view.pending_loads if p not in want)
        return SchedulePlan(want=want, evictable=lru_victims(view, keep=want), cancel=cancel,
                            predictions=self._means())
