"""The do-no-harm guard: measured policy rounds against target-only rounds, fallback and probes."""

from __future__ import annotations

import pytest

from memspec_ros.runtime.policies import MemSpecPolicy
from memspec_ros.runtime.throughput_guard import GuardMode, ThroughputGuard

from .hand_built import Stage, constant_predictor

GENERAL, CODE, LEGAL = "draft-general", "draft-code", "draft-legal"

TARGET_S = 0.05
"""A target-only round: one token in 50 ms (20 tokens/s)."""


class Clock:
    """Round start times: each round starts when the previous one ended."""

    def __init__(self) -> None:
        self.now = 0.0

    def run(self, guard: ThroughputGuard, *, drafted: bool, tokens: int, seconds: float) -> bool:
        """One round as the guard asks for it; returns whether it was the guard's target-only round."""
        forced = guard.wants_target_round()
        if forced:
            drafted, tokens, seconds = False, 1, TARGET_S
        guard.observe(forced=forced, drafted=drafted, emitted=tokens, start=self.now, seconds=seconds)
        self.now += seconds
        return forced


def _slow_policy_rounds(guard: ThroughputGuard, clock: Clock, n: int) -> int:
    """``n`` rounds of a policy at 1.2 tokens a 0.1 s round (12 tokens/s, 0.6x target-only); forced count."""
    return sum(clock.run(guard, drafted=True, tokens=1 + (i % 5 == 0), seconds=0.1) for i in range(n))


def test_a_policy_slower_than_target_only_falls_back_and_stops_loading() -> None:
    guard, clock = ThroughputGuard(min_rounds=12), Clock()
    forced = _slow_policy_rounds(guard, clock, 12)
    assert forced == 0 and guard.mode == GuardMode.POLICY, "the policy runs freely until it has a record"
    forced = _slow_policy_rounds(guard, clock, 4)
    assert forced == 2, "then two target-only rounds measure the reference"
    assert guard.mode == GuardMode.FALLBACK
    assert guard.wants_target_round() and not guard.allows_loads()
    status = guard.status()
    assert status.ratio is not None and status.ratio < 0.8
    assert "fallback" in status.describe() and "target-only" in status.describe()


def test_probes_back_off_while_they_lose_and_a_paying_probe_resumes() -> None:
    guard, clock = ThroughputGuard(min_rounds=12, first_probe_after=32, probe_rounds=12), Clock()
    _slow_policy_rounds(guard, clock, 16)
    assert guard.mode == GuardMode.FALLBACK
    assert _slow_policy_rounds(guard, clock, 32) == 32, "the guard answers with target-only rounds"
    assert guard.mode == GuardMode.PROBE and not guard.wants_target_round()
    _slow_policy_rounds(guard, clock, 13)  # a round is charged when the next one starts: 12 need 13
    assert guard.mode == GuardMode.FALLBACK and guard.status().next_probe_in == 64, "a lost probe doubles the wait"
    assert guard.status().fallbacks == 2
    _slow_policy_rounds(guard, clock, 64)
    assert guard.mode == GuardMode.PROBE
    for _ in range(13):  # the machine got quieter or the topic suits the drafts: 3 tokens a 0.1 s round
        clock.run(guard, drafted=True, tokens=3, seconds=0.1)
    assert guard.mode == GuardMode.POLICY and guard.allows_loads()


def test_a_policy_that_pays_is_left_alone_but_for_rare_reference_rounds() -> None:
    guard, clock = ThroughputGuard(baseline_every=96), Clock()
    forced = sum(clock.run(guard, drafted=True, tokens=3, seconds=0.1) for _ in range(1000))
    assert guard.mode == GuardMode.POLICY and guard.status().fallbacks == 0
    assert 2 <= forced <= 2 + 1000 // 96, "two reference rounds, then one every 96"
    assert guard.status().ratio is not None and guard.status().ratio > 1.4


def test_a_policy_that_mostly_skips_drafts_is_not_blamed_for_noise() -> None:
    """Draftless policy rounds are target-only rounds: a policy that drafts in few of them is
    target-only decoding, and a slightly slower window is noise, not harm."""
    guard, clock = ThroughputGuard(), Clock()
    for i in range(200):
        clock.run(guard, drafted=i % 8 == 0, tokens=1, seconds=TARGET_S * (1.05 if i % 2 else 0.97))
    assert guard.status().fallbacks == 0


def test_rounds_are_charged_from_one_start_to_the_next() -> None:
    """A round's cost includes what follows it before the next round starts (the scheduler's
    tick, the predictor): the guard charges start-to-start, not the round's own seconds."""
    guard, clock = ThroughputGuard(), Clock()
    for _ in range(28):
        forced = guard.wants_target_round()
        seconds = TARGET_S if forced else 0.04  # the round itself looks fast ...
        guard.observe(forced=forced, drafted=not forced, emitted=1 if forced else 2, start=clock.now,
                      seconds=seconds)
        clock.now += seconds + (0.0 if forced else 0.08)  # ... but a tick after it takes 80 ms
    assert guard.mode == GuardMode.FALLBACK


def test_the_gap_between_turns_is_not_charged_to_a_round() -> None:
    """A node serving one-shot goals idles between them and prefills the next prompt: neither is
    decoding. The last round of a turn is charged its own seconds, so a policy that pays is not
    made to look slower by the idle time after it (a 30 s gap once caused a fallback)."""
    guard, clock = ThroughputGuard(), Clock()
    for _ in range(5):  # five one-shot goals, 30 s apart
        for _ in range(10):
            clock.run(guard, drafted=True, tokens=3, seconds=0.1)
        guard.end_turn()
        clock.now += 30.0
    assert guard.status().fallbacks == 0 and guard.mode == GuardMode.POLICY
    assert guard.status().policy_tokens_per_s > 25


def test_a_new_turn_probes_at_once_until_probes_have_failed_twice() -> None:
    """A new prompt may bring a topic the drafts suit; a model set that never pays is not probed every turn."""
    guard, clock = ThroughputGuard(min_rounds=12), Clock()
    _slow_policy_rounds(guard, clock, 16)
    assert guard.mode == GuardMode.FALLBACK
    guard.end_turn()
    assert guard.mode == GuardMode.PROBE, "the next turn probes at once"
    _slow_policy_rounds(guard, clock, 13)
    assert guard.mode == GuardMode.FALLBACK
    guard.end_turn()
    assert guard.mode == GuardMode.PROBE, "after one failed probe, still at once"
    _slow_policy_rounds(guard, clock, 13)
    guard.end_turn()
    assert guard.mode == GuardMode.FALLBACK, "after two, the growing waits rule"


def test_memspec_in_fallback_plans_no_loads_and_runs_target_only() -> None:
    stage = Stage(budget_drafts=2)
    predictor = constant_predictor({GENERAL: 0.3, CODE: 0.9, LEGAL: 0.1}, stage.names)
    stage.load(GENERAL)
    policy = MemSpecPolicy(predictor)
    policy.bind(stage.catalogue, stage.budget, 4)
    plan = policy.plan(stage.view())
    assert CODE in plan.want, "normally the forecast draft is prefetched"
    clock = Clock()
    _slow_policy_rounds(policy.guard, clock, 28)  # the default guard wants 24 rounds of evidence
    assert policy.guard_status().mode == GuardMode.FALLBACK
    plan = policy.plan(stage.view())
    assert set(plan.want) == {GENERAL} and not plan.cancel, "no loads in fallback; the resident draft stays"
    assert policy.choose(stage.view()).draft is None


def test_the_guard_can_be_switched_off() -> None:
    stage = Stage(budget_drafts=2)
    policy = MemSpecPolicy(constant_predictor({GENERAL: 0.3}, stage.names), guard=False)
    assert policy.guard is None and policy.guard_status() is None


def test_member_rounds_are_in_neither_window() -> None:
    """The n-gram member is judged by its own measure: its fast rounds must not hide model drafts
    that lose, and its time is no target-only reference either."""
    guard, clock = ThroughputGuard(min_rounds=12), Clock()
    for i in range(40):
        if i % 2:  # every other round a member round emitting 4 tokens in 60 ms
            guard.observe(forced=False, drafted=True, emitted=4, start=clock.now, seconds=0.06, member=True)
            clock.now += 0.06
        else:
            clock.run(guard, drafted=True, tokens=1 + (i % 10 == 0), seconds=0.1)
    assert guard.mode == GuardMode.FALLBACK, "the drafts' rounds alone lose to target-only"
    status = guard.status()
    assert status.policy_tokens_per_s is not None and status.policy_tokens_per_s < 15
    assert status.target_tokens_per_s == pytest.approx(1 / TARGET_S), "only the guard's plain steps are the reference"


def test_memspec_in_fallback_still_runs_a_paying_ngram_match() -> None:
    """Fallback holds the model drafts and loads off; a lookup match costs neither and still runs."""
    from memspec_ros.core.ngram_proposer import NGRAM_NAME

    stage = Stage(budget_drafts=2, ngram=NGRAM_NAME)
    stage.load(GENERAL)
    policy = MemSpecPolicy(constant_predictor({GENERAL: 0.3, CODE: 0.9, LEGAL: 0.1}, stage.names))
    policy.bind(stage.catalogue, stage.budget, 4)
    _slow_policy_rounds(policy.guard, Clock(), 28)
    assert policy.guard_status().mode == GuardMode.FALLBACK
    assert policy.choose(stage.view()).draft is None, "no match: a plain target step"
    assert policy.choose(stage.view(ngram_match=3)).draft == NGRAM_NAME, "a match is no draft and no load"
    assert policy.guard_status().mode == GuardMode.FALLBACK


def _noisy_paying_rounds(guard: ThroughputGuard, n: int, seed: int) -> int:
    """A noisy policy that pays: 1 token (80%) or 5 tokens a 80 ms round, 22.5 tokens/s, 1.125x
    target-only, its turns 40 rounds long; returns the rounds run in fallback."""
    import random

    rng, clock, fallback = random.Random(seed), Clock(), 0
    for i in range(n):
        fallback += guard.mode == GuardMode.FALLBACK
        clock.run(guard, drafted=True, tokens=rng.choices([1, 5], weights=[0.8, 0.2])[0], seconds=0.08)
        if i % 40 == 39:
            guard.end_turn()
    return fallback


def test_a_noisy_policy_that_pays_is_not_sent_to_fallback_by_chance() -> None:
    """Judged on the point estimate of 24 rounds and 12-round probes (the guard before it weighed
    its evidence), this policy spent about a third of its rounds in fallback; on its evidence, a
    few percent."""
    point = sum(_noisy_paying_rounds(ThroughputGuard(window_rounds=24, confidence=0.0, resume_margin=0.03,
                                                     max_probe_rounds=12), 3000, seed) for seed in range(4))
    weighed = sum(_noisy_paying_rounds(ThroughputGuard(), 3000, seed) for seed in range(4))
    assert point > 0.2 * 4 * 3000, "the noise this guards against"
    assert weighed < 0.05 * 4 * 3000


def test_a_policy_that_loses_is_still_caught() -> None:
    """The same noise, but 0.8x target-only: most rounds run in fallback."""
    import random

    rng, clock, guard, fallback = random.Random(0), Clock(), ThroughputGuard(), 0
    for i in range(3000):
        fallback += guard.mode == GuardMode.FALLBACK
        clock.run(guard, drafted=True, tokens=rng.choices([1, 5], weights=[0.8, 0.2])[0], seconds=0.1125)
        if i % 40 == 39:
            guard.end_turn()
    assert fallback > 0.8 * 3000


def test_a_probe_near_break_even_runs_on_until_it_can_be_judged() -> None:
    guard, clock = ThroughputGuard(min_rounds=12, probe_rounds=12, max_probe_rounds=48), Clock()
    _slow_policy_rounds(guard, clock, 16)
    guard.end_turn()
    assert guard.mode == GuardMode.PROBE
    for i in range(13):  # 1 or 3 tokens a 0.1 s round: 20 tokens/s, target-only's own rate, but noisy
        clock.run(guard, drafted=True, tokens=1 + 2 * (i % 2), seconds=0.1)
    assert guard.mode == GuardMode.PROBE, "twelve rounds cannot tell this policy from target-only"
    for i in range(36):
        clock.run(guard, drafted=True, tokens=1 + 2 * (i % 2), seconds=0.1)
    assert guard.mode == GuardMode.POLICY, "at the longest probe a policy within the margin keeps its turn"
    fallbacks = guard.status().fallbacks
    _slow_policy_rounds(guard, clock, 30)
    assert guard.mode == GuardMode.FALLBACK and guard.status().fallbacks == fallbacks + 1, \
        "and loses it again once it clearly loses"


def test_rates_carry_their_standard_error() -> None:
    from memspec_ros.runtime.throughput_guard import _rate_and_error

    assert _rate_and_error([]) is None
    rate, error = _rate_and_error([(1, 0.05)] * 8)
    assert rate == pytest.approx(20.0) and error == pytest.approx(0.0)
    rate, error = _rate_and_error([(1, 0.1), (3, 0.1)] * 12)
    # the mean of 24 rounds of 1 or 3 tokens (sd 1.02 with n-1) over 0.1 s each
    assert rate == pytest.approx(20.0) and error == pytest.approx(1.0215 / 24 ** 0.5 / 0.1, rel=1e-3)
    assert _rate_and_error([(2, 0.1)])[1] == float("inf")
