"""Do no harm: a policy's measured throughput against target-only decoding, and a fallback.

Every per-round choice of the managed policies rests on models: forecast acceptance, EMA step
and verification times, a load's cost. Each can be wrong in ways the round loop cannot see from
inside: a weak model set, a predictor worse than a fixed draft, a CPU shared with other nodes
(the loader and the drafts then compete with decoding), Python overhead around a round. The
guard looks only at what the wall clock says:

* **policy rounds**: tokens emitted over the seconds from one round's start to the next (the
  scheduler's tick and the predictor included), for every round the policy chose itself;
* **target-only rounds**: the same for plain target steps: every round that ran without a draft
  (the policy's own choice or the guard's). Where the policy drafts every round, the guard
  schedules them itself: ``initial_baseline`` once the policy has run ``min_rounds`` rounds,
  then one every ``baseline_every`` rounds, so the reference follows the machine's current speed
  (a busy neighbour slows both alike).

When the policy's recent rounds emit fewer tokens per second than target-only decoding, the
guard switches to **fallback**: target-only rounds, no new loads (loads take CPU from decoding
on a CPU-only robot), the resident drafts kept. It **probes** the policy again after
``first_probe_after`` rounds, doubling the wait after every probe that still loses (to
``max_probe_after``), and returns to the policy when a probe wins. A failed probe costs a few
rounds' worth of the policy's deficit, so a model set that never pays costs well under 1% once
the waits have grown.

**Evidence, not a point estimate.** A drafting round emits 1 to k+1 tokens, so a rate over a few
dozen rounds is noisy: on the default model set (acceptance 0.31, 1.75 tokens a round) the rate of
24 rounds has a standard error of the order of 15%, and the window is judged after every round. Judged on
its point estimate (and a probe on 12 rounds), memspec fell back 9 times in a full benchmark run and
spent 22% of its rounds in fallback while it ran 1.4x target-only over the whole run. So each rate
carries its standard error (a ratio estimator, delta method), and:

* the policy **falls back** only when even its optimistic bound, the ratio plus ``confidence``
  standard errors, is below ``1 - fallback_margin``;
* a **probe** resumes the policy once its pessimistic bound reaches 1 (drafting wins), fails once
  its optimistic bound is below ``1 - fallback_margin`` (it clearly loses), and otherwise goes on
  (the policy decides meanwhile) until ``max_probe_rounds``, where a point estimate within
  ``fallback_margin`` of target-only resumes it: near break-even either choice costs little.

A policy that clearly loses (a weak model set, a busy CPU: 0.6-0.8x) is caught within a window as
before; one near break-even takes longer to judge, which costs little either way.

Rounds of the zero-memory n-gram member (:mod:`.ngram_member`) count as neither: the guard judges the
model drafts and the loads they bring, which cost memory bandwidth and CPU the member does not.
The member is judged round by round on its own measured acceptance against a target step (the
policy runs it only on a lookup match that pays), so it may run in fallback too
(:meth:`ThroughputGuard.allows_member`), and its rounds are left out of both windows: a good
member must not hide drafts that lose, and a weak one is already kept off by its own measure.

Times come from the view's clock, so the guard runs unchanged in the trace simulator (virtual
time) and in the node (wall time).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class GuardMode(StrEnum):
    """What the guard lets the policy do."""

    POLICY = "policy"
    """The policy decides (it has not been caught slower than target-only)."""
    FALLBACK = "fallback"
    """Target-only rounds, no loads: the policy measured slower than target-only."""
    PROBE = "probe"
    """The policy decides for a few rounds, to measure whether it pays again."""


@dataclass(frozen=True)
class GuardStatus:
    """The guard's state and the measurements it rests on (for logs, diagnostics and reports)."""

    mode: GuardMode
    policy_tokens_per_s: float | None
    target_tokens_per_s: float | None
    fallbacks: int
    """Times the guard fell back so far."""
    fallback_rounds: int
    """Rounds run in fallback so far."""
    next_probe_in: int | None
    """Rounds until the next probe (fallback only)."""

    @property
    def ratio(self) -> float | None:
        """Policy over target-only tokens/s, as last measured."""
        if not self.policy_tokens_per_s or not self.target_tokens_per_s:
            return None
        return self.policy_tokens_per_s / self.target_tokens_per_s

    def describe(self) -> str:
        """One line: what the guard does and why."""
        def rate(x: float | None) -> str:
            return "?" if x is None else f"{x:.1f}"
        measured = (f"drafting measured {rate(self.policy_tokens_per_s)} tokens/s against target-only "
                    f"{rate(self.target_tokens_per_s)}")
        if self.mode == GuardMode.FALLBACK:
            return (f"do-no-harm fallback: {measured}; decoding target-only without model drafts or loads "
                    f"(where the n-gram member is on, a lookup match that pays still runs), next probe in "
                    f"{self.next_probe_in} rounds (fallback #{self.fallbacks})")
        if self.mode == GuardMode.PROBE:
            return f"do-no-harm probe: {measured}; measuring the policy again"
        return f"drafting pays: {measured}"


class ThroughputGuard:
    """Measures a policy against target-only decoding and falls back when it loses (see module doc)."""

    def __init__(self, *, window_rounds: int = 48, min_rounds: int = 24, baseline_rounds: int = 8,
                 baseline_every: int = 96, initial_baseline: int = 2, fallback_margin: float = 0.03,
                 resume_margin: float = 0.0, probe_rounds: int = 12, max_probe_rounds: int = 48,
                 first_probe_after: int = 32, max_probe_after: int = 1024, confidence: float = 1.64) -> None:
        self.window_rounds = window_rounds
        self.min_rounds = min_rounds
        self.baseline_every = baseline_every
        self.initial_baseline = initial_baseline
        self.fallback_margin = fallback_margin
        self.resume_margin = resume_margin
        self.probe_rounds = probe_rounds
        self.max_probe_rounds = max(probe_rounds, max_probe_rounds)
        self.confidence = confidence
        self.first_probe_after = first_probe_after
        self.max_probe_after = max_probe_after
        self.mode = GuardMode.POLICY
        self._policy: deque[tuple[int, float]] = deque(maxlen=window_rounds)
        self._policy_drafted: deque[bool] = deque(maxlen=window_rounds)
        self._target: deque[tuple[int, float]] = deque(maxlen=baseline_rounds)
        self._since_baseline = 0
        self._baseline_due = 0
        self._mode_rounds = 0
        self._probe_after = first_probe_after
        self._fallbacks = 0
        self._fallback_rounds = 0
        self._pending: tuple[bool, bool, int, float, float] | None = None
        """The previous round, awaiting its cycle time: (the guard's, drafted, tokens, start, own seconds);
        None after a member round (its time is nobody's sample)."""

    # ------------------------------------------------------------------ decisions
    def wants_target_round(self) -> bool:
        """Whether the next round must be target-only (fallback, or a baseline sample is due)."""
        return self.mode == GuardMode.FALLBACK or self._baseline_due > 0

    def allows_loads(self) -> bool:
        """Whether the policy may start loads (not in fallback)."""
        return self.mode != GuardMode.FALLBACK

    def allows_member(self) -> bool:
        """Whether a round the guard claims may run the n-gram member instead of a plain target step:
        yes in fallback, no while a target-only reference sample is due (it must be a plain step)."""
        return self._baseline_due == 0

    # ------------------------------------------------------------------ measurements
    def observe(self, *, forced: bool, drafted: bool, emitted: int, start: float, seconds: float,
                member: bool = False) -> None:
        """A finished round: ``forced`` if it was the guard's target-only round, ``drafted`` if a draft proposed,
        ``member`` if the n-gram member ran it (measured by neither window, see the module doc).

        The round's cost is the time from its start to the next round's start in the same turn
        (what it really took, ticks included), known one round later; the last round of a turn
        counts its own ``seconds`` (:meth:`end_turn`): the time between turns is idle time and the
        next prompt's prefill, not decoding.
        """
        if self._pending is not None:
            p_forced, p_drafted, p_tokens, p_start, p_seconds = self._pending
            self._account(p_forced, p_drafted, p_tokens, start - p_start if start > p_start else p_seconds)
        self._pending = None if member else (forced, drafted, emitted, start, seconds)
        if forced and not member and self._baseline_due > 0:
            self._baseline_due -= 1
        self._step()

    def end_turn(self) -> None:
        """A turn ended (a new one begins): its last round is charged its own seconds.

        A new prompt often brings a new topic, where drafts that lost on the last one may pay: a
        fallback that has not yet failed a probe twice in a row probes at once instead of waiting out
        its rounds. After two failed probes the waits rule (a model set that never pays would
        otherwise pay for a probe every turn)."""
        if self._pending is not None:
            p_forced, p_drafted, p_tokens, _, p_seconds = self._pending
            self._account(p_forced, p_drafted, p_tokens, p_seconds)
            self._pending = None
        if self.mode == GuardMode.FALLBACK and self._probe_after <= 2 * self.first_probe_after:
            self._enter(GuardMode.PROBE)

    def _account(self, forced: bool, drafted: bool, tokens: int, seconds: float) -> None:
        if seconds <= 0:
            return
        if not drafted:
            self._target.append((tokens, seconds))
            self._since_baseline = 0
        if not forced:
            self._policy.append((tokens, seconds))
            self._policy_drafted.append(drafted)
            self._since_baseline += 1
            if not self._target and self._baseline_due == 0 and len(self._policy) >= self.min_rounds:
                self._baseline_due = self.initial_baseline
            elif self._target and self._since_baseline >= self.baseline_every and self._baseline_due == 0:
                self._baseline_due = 1

    def _step(self) -> None:
        """Advance the state machine by one round."""
        self._mode_rounds += 1
        if self.mode == GuardMode.FALLBACK:
            self._fallback_rounds += 1
            if self._mode_rounds >= self._probe_after:
                self._enter(GuardMode.PROBE)
            return
        rounds_needed = self.probe_rounds if self.mode == GuardMode.PROBE else self.min_rounds
        if len(self._policy) < min(rounds_needed, self.window_rounds) \
                or len(self._target) < min(self.initial_baseline, self._target.maxlen or 1):
            return
        evidence = self.evidence()
        if evidence is None:
            return
        ratio, error = evidence
        optimistic, pessimistic = ratio + self.confidence * error, ratio - self.confidence * error
        if self.mode == GuardMode.PROBE:
            decided = len(self._policy) >= min(self.max_probe_rounds, self.window_rounds)
            if pessimistic >= 1.0 + self.resume_margin or (decided and ratio >= 1.0 - self.fallback_margin):
                self._probe_after = self.first_probe_after
                self._enter(GuardMode.POLICY)
            elif optimistic < 1.0 - self.fallback_margin or decided:
                self._probe_after = min(self.max_probe_after, self._probe_after * 2)
                self._fallback()
        elif optimistic < 1.0 - self.fallback_margin and sum(self._policy_drafted) * 4 >= len(self._policy_drafted):
            self._fallback()  # (a policy that drafts in under a quarter of its rounds is nearly target-only)

    def evidence(self) -> tuple[float, float] | None:
        """Policy over target-only tokens/s and the standard error of that ratio; None before both are measured."""
        policy, target = _rate_and_error(self._policy), _rate_and_error(self._target)
        if policy is None or target is None or policy[0] <= 0 or target[0] <= 0:
            return None
        ratio = policy[0] / target[0]
        return ratio, ratio * math.hypot(policy[1] / policy[0], target[1] / target[0])

    def _fallback(self) -> None:
        self._fallbacks += 1
        self._enter(GuardMode.FALLBACK)

    def _enter(self, mode: GuardMode) -> None:
        self.mode = mode
        self._mode_rounds = 0
        if mode == GuardMode.PROBE:
            self._policy.clear()  # the probe is judged on its own rounds
            self._policy_drafted.clear()

    # ------------------------------------------------------------------ reporting
    def status(self) -> GuardStatus:
        """The current state and rates."""
        def rate(samples: deque[tuple[int, float]]) -> float | None:
            measured = _rate_and_error(samples)
            return measured[0] if measured is not None else None
        return GuardStatus(mode=self.mode, policy_tokens_per_s=rate(self._policy),
                           target_tokens_per_s=rate(self._target), fallbacks=self._fallbacks,
                           fallback_rounds=self._fallback_rounds,
                           next_probe_in=max(0, self._probe_after - self._mode_rounds)
                           if self.mode == GuardMode.FALLBACK else None)


def _rate_and_error(samples: Iterable[tuple[int, float]]) -> tuple[float, float] | None:
    """Tokens per second over ``(tokens, seconds)`` rounds and its standard error.

    The rate is a ratio of sums, so its error comes from the rounds' residuals ``tokens - rate *
    seconds`` (the delta method): rounds that all emit alike have none, drafting rounds that emit
    1 to k+1 tokens have much. None without rounds; with one round the error is unknown (infinite).
    """
    rounds = list(samples)
    seconds = sum(s for _, s in rounds)
    if not rounds or seconds <= 0:
        return None
    rate = sum(t for t, _ in rounds) / seconds
    n = len(rounds)
    if n < 2:
        return rate, math.inf
    variance = sum((t - rate * s) ** 2 for t, s in rounds) / (n - 1)
    return rate, math.sqrt(variance / n) / (seconds / n)
