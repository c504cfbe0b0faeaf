"""``memspec`` and its two ablations.

MemSpec separates *selection* (which draft would be best) from *availability* (which drafts are
in memory):

* every check, the predictor forecasts each draft's acceptance over the next segment;
* the working-set manager keeps the drafts with the highest forecast resident - prefetching the
  missing ones in the background, evicting the least needed, abandoning loads that are no
  longer wanted - within the budget;
* every round runs the best draft that is resident *now*, proposing as many tokens as its
  forecast acceptance and the measured step times make fastest (dynamic speculation length,
  :mod:`..speculation_length`), or none, when a target-only round beats every resident draft
  even at its best length. It never waits for a load: a better draft is swapped in the round
  after its load completes.
* a draftless stretch is interrupted by a *probe* round every ``probe_every`` (16) rounds: a
  round without a draft observes nothing about the drafts, so without probes one unlucky round
  could leave a good draft unused for the rest of a turn. Probes are insurance, not free (each
  runs a draft the measured times call slower), so they are rare.
* where the runtime has the n-gram member (:mod:`..ngram_member`) and its lookup matches this
  round (the runtime looks up before every round: ``PolicyView.ngram_match``), it runs instead of
  a draftless round whenever its measured acceptance on a match pays for the longer verification,
  and instead of the best resident draft when that beats the draft's expected rate by
  ``switch_margin``.

Ablations (the paper's): ``memspec-predict-only`` lets the predictor choose but loads on demand
and waits; ``memspec-manage-only`` keeps the manager but drives it with acceptance statistics
instead of the predictor.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from ..load_value import net_of_load
from ..ngram_member import NgramValue
from ..predictor import DraftPredictor
from ..speculation_length import best_length, per_token_acceptance, rate_at_k
from ..throughput_guard import GuardStatus, ThroughputGuard
from .base import (
    Decision,
    Policy,
    PolicyView,
    RoundFeedback,
    SchedulePlan,
    best_of,
    fill_budget,
    stall_choice,
    stall_plan,
)


def working_set(view: PolicyView, utility: Mapping[str, float], *, keep_bonus: float, min_utility: float,
                if_loaded: Mapping[str, float] | None = None) -> list[str]:
    """The drafts to hold: highest utility first, within budget.

    Drafts already in memory (or loading) get ``keep_bonus`` so that near-ties do not churn
    the working set. Drafts below ``min_utility`` are not worth loading. With ``if_loaded``
    (each draft's utility net of a load's measured cost, :mod:`..load_value`), a draft that
    would need a load counts at that, and is loaded only if it then still beats every draft
    present: otherwise the load would cost more decoding time than the draft wins back, even
    into a free slot.
    """
    present = set(view.resident) | set(view.pending_loads)
    bar = min_utility
    if if_loaded is None:
        if_loaded = utility
    else:
        bar = max([bar, *(utility.get(n, 0.0) for n in present)])
    score = {n: utility.get(n, 0.0) + keep_bonus if n in present else if_loaded.get(n, 0.0) for n in view.usable()}
    ranked = [n for n in sorted(score, key=lambda n: -score[n]) if n in present or score[n] >= bar]
    return fill_budget(ranked, view.catalogue, view.budget)


class _ManagedPolicy(Policy):
    """Shared machinery of the never-stalling policies: plan a working set, run the best resident."""

    def __init__(self, *, keep_bonus: float = 0.05, switch_margin: float = 0.03, prior_tokens: float = 8.0,
                 evidence_rounds: int = 8, min_utility: float = 0.02, cost_aware: bool = True,
                 target_margin: float = 0.1, probe_every: int = 16, dynamic_k: bool = True,
                 preempt_margin: float | None = 0.2, load_aware: bool = True, guard: bool = True,
                 ngram: bool = True) -> None:
        super().__init__()
        self.use_ngram = ngram
        """Whether to run the runtime's n-gram member when it pays (False: model drafts only, as before
        the member existed; the bench's ``memspec-no-ngram``)."""
        self.guard = ThroughputGuard() if guard else None
        self._guarded_round = False
        self._forecast_error: float | None = None
        self.load_aware = load_aware
        self.preempt_margin = preempt_margin
        self.cost_aware = cost_aware
        self.dynamic_k = dynamic_k
        self.probe_every = probe_every
        self._draftless_streak = 0
        self.prior_tokens = prior_tokens
        self.evidence_rounds = evidence_rounds
        self.target_margin = target_margin
        self.keep_bonus = keep_bonus
        self.switch_margin = switch_margin
        self.min_utility = min_utility
        self.utility: dict[str, float] = {}
        self._last_plan_round = 0
        self.ngram_value = NgramValue()
        self._chose_ngram = False

    def _utility(self, view: PolicyView) -> dict[str, float]:
        raise NotImplementedError

    def _live_score(self, view: PolicyView) -> dict[str, float]:
        """Plan-time utility updated by what the draft achieved since.

        The forecast acts as a prior worth ``prior_tokens`` proposed tokens; the tokens the draft
        proposed (and got accepted) in the last ``evidence_rounds`` rounds are the evidence. One
        unlucky round therefore does not overturn a confident forecast, a segment of them does.
        """
        score: dict[str, float] = {}
        window = view.acceptance.window[-self.evidence_rounds:]
        for n in view.resident:
            u = self.utility.get(n, 0.0)
            rounds = [(r.proposed, r.accepted) for r in window if r.draft == n]
            prop = sum(p for p, _ in rounds)
            # Rounds may have run shorter than k (dynamic length): compare in rate-at-k units.
            observed = rate_at_k(rounds, view.k) if self.dynamic_k else (
                sum(a for _, a in rounds) / prop if prop else None)
            prior = self.prior_tokens * self.forecast_trust()
            score[n] = u if observed is None else (u * prior + observed * prop) / (prior + prop)
        return score

    def forecast_trust(self) -> float:
        """How much of ``prior_tokens`` a forecast is worth: 1 while forecasts match what the drafts
        then achieve, down to 0.15 as their mean error grows past 0.1 (a weak or mismatched predictor
        then yields to observed acceptance within a round or two)."""
        if self._forecast_error is None:
            return 1.0
        return min(1.0, max(0.15, 1.0 - max(0.0, self._forecast_error - 0.1) / 0.25))

    def _track_forecast_error(self, view: PolicyView) -> None:
        """Compare the last plan's forecasts with the acceptance the drafts achieved since (EMA of |error|)."""
        if not self.utility:
            return
        since = [r for r in view.acceptance.window if r.round_index >= self._last_plan_round and r.draft]
        for name in {r.draft for r in since}:
            rounds = [(r.proposed, r.accepted) for r in since if r.draft == name]
            observed = rate_at_k(rounds, view.k)
            if observed is None or name not in self.utility or sum(p for p, _ in rounds) < 4:
                continue
            err = abs(self.utility[name] - observed)
            self._forecast_error = err if self._forecast_error is None else 0.75 * self._forecast_error + 0.25 * err

    def _choose(self, view: PolicyView) -> Decision:
        decision = self._decide(view)
        self._chose_ngram = decision.draft is not None and decision.draft == view.ngram
        return decision

    def _decide(self, view: PolicyView) -> Decision:
        acc = view.acceptance
        alone = acc.expected_tokens_per_s(None, 0.0, view.k)
        self._guarded_round = self.guard is not None and self.guard.wants_target_round()
        if self._guarded_round:
            # The guard holds the model drafts off; a lookup match that pays still runs (module doc
            # of ..throughput_guard): it costs no memory, no load, no draft step.
            ngram = self._ngram_choice(view, alone) if self.guard.allows_member() else None
            if ngram is None:
                return Decision(None)
            self._guarded_round = False
            return Decision(view.ngram, k=ngram[0])
        resident = [n for n in view.resident if n not in view.unusable]
        score = self._live_score(view)
        best = best_of(resident, score, prefer=view.active, margin=self.switch_margin)
        matched = self.use_ngram and view.ngram is not None and view.ngram_match > 0
        if not self.cost_aware:
            return Decision(best if best is not None or not matched else view.ngram)
        # The best resident draft may still be worse than none (an off-domain draft while the
        # right one loads): compare expected engine tokens/s from measured step times, at the
        # proposal length that suits its forecast (dynamic speculation length).
        k = None
        ngram = self._ngram_choice(view, alone)
        if best is None:
            return Decision(view.ngram, k=ngram[0]) if ngram is not None else Decision(None)
        with_draft = acc.expected_tokens_per_s(best, score.get(best, 0.0), view.k)
        step = acc.step_s.get(best)
        if self.dynamic_k and step is not None and acc.verify_s is not None:
            choice = best_length(per_token_acceptance(score.get(best, 0.0), view.k), step, acc.verify_s, view.k)
            k, with_draft = choice.k, choice.tokens_per_s
        slower = with_draft is not None and alone is not None and alone > with_draft * (1.0 + self.target_margin)
        if slower:
            if self._draftless_streak >= self.probe_every:
                return Decision(best, k=k)  # the probe: a stretch without a model draft learns nothing of it
            return Decision(view.ngram, k=ngram[0]) if ngram is not None else Decision(None)
        if ngram is not None and with_draft is not None and ngram[1] > with_draft * (1.0 + self.switch_margin):
            return Decision(view.ngram, k=ngram[0])
        return Decision(best, k=k)

    def _ngram_choice(self, view: PolicyView, alone: float | None) -> tuple[int, float] | None:
        """``(k, expected tokens/s)`` of a round with the n-gram member, or None when it is off, its
        lookup finds no match this round (``view.ngram_match``), or its measured acceptance on a match
        does not beat a target step by ``target_margin`` (the margin model drafts must clear too: the
        estimate rests on moving averages).

        The runtime looked the match up before the round, so the choice is made knowing it: the
        member competes only where it has something to propose, at no more than the match's length.
        Before any verification has been timed there is nothing to weigh: a match is tried.
        """
        if view.ngram is None or not self.use_ngram or view.ngram_match <= 0:
            return None
        acc = view.acceptance
        longest = min(view.k, view.ngram_match)
        if acc.verify_s is None or alone is None:
            return (longest, float("inf"))
        step = acc.step_s.get(view.ngram, 0.0)
        choice = self.ngram_value.on_match(longest, step, acc.verify_s)
        if choice.tokens_per_s <= alone * (1.0 + self.target_margin):
            return None
        return choice.k, choice.tokens_per_s

    def _observe(self, feedback: RoundFeedback, view: PolicyView) -> None:
        if self.guard is not None:
            self.guard.observe(forced=self._guarded_round, drafted=feedback.draft is not None and feedback.proposed > 0,
                               emitted=feedback.emitted, start=view.now, seconds=feedback.seconds,
                               member=self._chose_ngram)
        if self._guarded_round:
            return  # the guard's round, not a draftless choice of the policy
        if self._chose_ngram:
            self.ngram_value.observe(feedback.proposed, feedback.accepted)
        # n-gram rounds say nothing about the model drafts: they count toward the next probe
        model_draft = feedback.draft is not None and feedback.draft != view.ngram
        self._draftless_streak = 0 if model_draft else self._draftless_streak + 1

    def new_turn(self, view: PolicyView) -> None:
        """A new prompt arrived: the guard charges the last turn's final round its own time (the gap
        since was idle time and prefill, not decoding)."""
        with self._lock:
            if self.guard is not None:
                self.guard.end_turn()
        super().new_turn(view)

    def observe_ngram_replay(self, rounds: Sequence[tuple[int, int]]) -> None:
        """Teacher-forced ``(proposed, accepted)`` rounds of the n-gram member over a served turn
        (online learning, in idle time): its measured value learns even where it did not run, one
        observation per turn (:meth:`NgramValue.observe_replay`)."""
        with self._lock:
            self.ngram_value.observe_replay(rounds)

    def guard_status(self) -> GuardStatus | None:
        """The do-no-harm guard's state (None: this policy runs unguarded)."""
        with self._lock:
            return self.guard.status() if self.guard is not None else None

    def _plan(self, view: PolicyView) -> SchedulePlan:
        if self.guard is not None and not self.guard.allows_loads():
            # Fallback: no loads (they take CPU from decoding), nothing evicted either, so a probe
            # finds the drafts it had; no forecast either (no round would use it).
            return SchedulePlan(want=tuple(view.resident), cancel=tuple(view.pending_loads),
                                predictions=dict(self.utility))
        self._track_forecast_error(view)
        self.utility = self._utility(view)
        self._last_plan_round = view.round_index
        want = working_set(view, self.utility, keep_bonus=self.keep_bonus, min_utility=self.min_utility,
                           if_loaded=self._net_of_loads(view))
        active = view.active
        # Keep the draft that is running unless a draft we want is already resident to take over
        # (evicting it first would leave the decoder with nothing better while loads are in
        # flight) or it alone holds the memory a much better forecast needs (_preempts).
        takeover = any(n in want and n != active and self.utility.get(n, 0) >= self.utility.get(active, 0)
                       for n in view.resident) if active else True
        evictable = [n for n in view.resident if n not in want and n != active]
        evictable.sort(key=lambda n: self.utility.get(n, 0.0))
        if active in view.resident and active not in want and (takeover or self._preempts(view, want)):
            evictable.append(active)  # last: only when nothing else makes room
        cancel = tuple(n for n in view.pending_loads if n not in want)
        return SchedulePlan(want=tuple(want), evictable=tuple(evictable), cancel=cancel,
                            predictions=dict(self.utility))

    def _net_of_loads(self, view: PolicyView) -> Mapping[str, float] | None:
        """Each draft's utility if it had to be loaded now: its forecast net of the measured
        load cost, spread over the tokens this turn may still emit (:mod:`..load_value`).

        None (loads are not charged) until a load's cost has been measured, between turns (a
        load then slows no decoding) and with ``load_aware`` off.
        """
        acc, cost = view.acceptance, view.load_cost_s
        verify = acc.quiet_verify_s or acc.verify_s
        if not self.load_aware or cost is None or view.remaining <= 0 or not acc.step_s or verify is None:
            return None
        model_steps = [s for n, s in acc.step_s.items() if n != view.ngram]  # a lookup is no draft step
        if not model_steps:
            return None
        mean_step = statistics.fmean(model_steps)
        return {n: net_of_load(u, view.k, view.k * acc.step_s.get(n, mean_step) + verify, cost, view.remaining)
                for n, u in self.utility.items()}

    def _preempts(self, view: PolicyView, want: list[str]) -> bool:
        """Whether the running draft should make room although nothing better is resident yet.

        Normally it runs on until a wanted draft has loaded. That waits forever when it fills the
        memory alone (a one-draft budget): nothing else can load while it stays. So when it is
        the only draft in memory and a wanted draft is forecast ``preempt_margin`` above it, it
        is evicted for that one; the rounds until the load completes run with what the decoder
        can choose then (target-only at worst), which costs at most the running draft's own
        small advantage.
        """
        active = view.active
        if self.preempt_margin is None or set(view.resident) | set(view.pending_loads) != {active}:
            return False
        best_missing = max((self.utility.get(n, 0.0) for n in want if n not in view.resident), default=None)
        return best_missing is not None and best_missing - self.utility.get(active, 0.0) >= self.preempt_margin


class MemSpecPolicy(_ManagedPolicy):
    """Predictor + working-set manager; never stalls."""

    name = "memspec"
    needs_predictor = True

    def __init__(self, predictor: DraftPredictor, **kwargs: float) -> None:
        super().__init__(**kwargs)
        self.predictor = predictor

    def _new_turn(self, view: PolicyView) -> None:
        self._last_plan_round = view.round_index

    def _utility(self, view: PolicyView) -> dict[str, float]:
        return predict_with_feedback(self.predictor, view, self._last_plan_round)


class MemSpecManageOnlyPolicy(_ManagedPolicy):
    """The manager driven by acceptance statistics (no predictor); never stalls.

    Drafts never run count at ``prior``; the ones that did at their moving average. Without a
    forecast it can only learn that a draft is needed by running it, which is the point of the
    ablation.
    """

    name = "memspec-manage-only"

    def __init__(self, prior: float = 0.25, **kwargs: float) -> None:
        # No preemption: untried drafts count at the prior, which would evict a running draft
        # for each of them in turn on a one-draft budget; it is the forecast that justifies it.
        kwargs.setdefault("preempt_margin", None)
        super().__init__(**kwargs)
        self.prior = prior

    def _utility(self, view: PolicyView) -> dict[str, float]:
        return {n: view.acceptance.ema(n, self.prior) for n in view.usable()}


class MemSpecPredictOnlyPolicy(Policy):
    """The predictor chooses; the chosen draft is loaded on demand and waited for (no prefetch)."""

    name = "memspec-predict-only"
    needs_predictor = True

    def __init__(self, predictor: DraftPredictor, margin: float = 0.03) -> None:
        super().__init__()
        self.predictor = predictor
        self.margin = margin
        self.selected: str | None = None
        self.utility: dict[str, float] = {}
        self._last_plan_round = 0

    def _new_turn(self, view: PolicyView) -> None:
        self._last_plan_round = view.round_index

    def _observe(self, feedback: RoundFeedback, view: PolicyView) -> None:
        """Nothing beyond the shared statistics (adaptation happens at plan time)."""

    def _choose(self, view: PolicyView) -> Decision:
        if self.selected is None:
            self.selected = view.active or (view.resident[0] if view.resident else None)
        return stall_choice(view, self.selected, self.utility)

    def _plan(self, view: PolicyView) -> SchedulePlan:
        self.utility = predict_with_feedback(self.predictor, view, self._last_plan_round)
        self._last_plan_round = view.round_index
        self.selected = best_of(view.usable(), self.utility, prefer=self.selected or view.active,
                                margin=self.margin)
        return stall_plan(view, self.selected, self.utility)


def predict_with_feedback(predictor: DraftPredictor, view: PolicyView, since_round: int) -> dict[str, float]:
    """Adapt the predictor to acceptance observed since ``since_round``, then forecast.

    Drafts that failed to load get utility 0 (nothing will make them resident).
    """
    window = max(1, view.round_index - since_round)
    recent = view.acceptance.window[-window:]
    observed = {}
    for n in view.catalogue.names:
        # Forecasts are rates at the configured k; rounds may have run shorter (dynamic length).
        rate = rate_at_k([(r.proposed, r.accepted) for r in recent if r.draft == n], view.k)
        if rate is not None:
            observed[n] = rate
    if observed:
        predictor.adapt(observed)
    pred = predictor.predict(view.context, view.draft_for_domain(view.hint))
    return {n: (0.0 if n in view.unusable else pred.get(n, 0.0)) for n in view.catalogue.names}
