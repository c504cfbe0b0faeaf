"""The n-gram proposer as a member of the draft pool: always resident, 0 bytes, never loaded.

A model draft has to be in memory before it can propose; the n-gram proposer
(:mod:`memspec_ros.core.ngram_proposer`) reads the dialogue itself, so it is always available
and costs no budget. It is not a catalogue entry: the catalogue lists what can be loaded and
evicted, and the predictor forecasts those. The runtime hands it to policies as
:attr:`~memspec_ros.runtime.policies.base.PolicyView.ngram`, runs it like any draft when a
policy names it, and the acceptance statistics, residency and reports show it under its name.

What it is worth is measured, not forecast: a round where the context's last n-gram never
occurred before proposes nothing and costs exactly a target-only step, so choosing it instead of
a draftless round can only lose when its proposals are accepted too rarely to pay for the longer
verification. :class:`NgramValue` keeps the two numbers that decide it: how often a lookup finds
a match and how much of a match the target accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memspec_ros.core.greedy_match import accepted_prefix, proposal_length
from memspec_ros.core.ngram_proposer import DEFAULT_MAX_N, DEFAULT_MIN_N, NGRAM_NAME, NgramProposer
from memspec_ros.core.sampling import GREEDY
from memspec_ros.knobs import NGRAM_N

from .speculation_length import LengthChoice, best_length, per_token_acceptance

NGRAM_DOMAIN = "repeats"
"""The domain the member shows on the residency topic: what it drafts from is the dialogue's own
repeats (names, commands, pasted code, earlier answers), whatever the topic."""


@dataclass(frozen=True)
class NgramSettings:
    """The n-gram member's configuration (``RuntimeConfig.ngram``; None there turns it off)."""

    min_n: int = DEFAULT_MIN_N
    max_n: int = DEFAULT_MAX_N

    def __post_init__(self) -> None:
        NGRAM_N.check(self.min_n)
        NGRAM_N.check(self.max_n)
        if self.min_n > self.max_n:
            raise ValueError(f"ngram_min_n ({self.min_n}) must not exceed ngram_max_n ({self.max_n})")

    def proposer(self, vocab_size: int) -> NgramProposer:
        """The proposer these settings describe, over a target vocabulary of ``vocab_size``."""
        return NgramProposer(vocab_size, min_n=self.min_n, max_n=self.max_n, name=NGRAM_NAME)


class NgramValue:
    """Measured value of the n-gram member: its acceptance when it matches, and how often it matched.

    The runtime looks the match up before every round, so a policy knows whether the member has
    something to propose; what it cannot know in advance is how much of it the target will accept.

    Both are moving averages (rate ``alpha``) starting from priors (``prior_hit``,
    ``prior_acceptance``), so an untried member is tried: a miss in place of a draftless round
    costs nothing, and the first few matches settle the acceptance.
    """

    def __init__(self, *, alpha: float = 0.2, prior_hit: float = 0.3, prior_acceptance: float = 0.5) -> None:
        self.alpha = alpha
        self.hit = prior_hit
        self.acceptance = prior_acceptance
        self.rounds = 0
        self.replayed_turns = 0

    def observe(self, proposed: int, accepted: int) -> None:
        """A round the member was chosen for: ``proposed`` 0 means the lookup found no match."""
        self.rounds += 1
        self._move(float(proposed > 0), accepted / proposed if proposed > 0 else None)

    def observe_replay(self, rounds: Sequence[tuple[int, int]]) -> None:
        """A served turn replayed teacher-forced (:func:`ngram_rounds`, online learning): one
        observation for the whole turn, its matched rounds' pooled acceptance and its match share.

        Fed round by round, a replay's 20-40 rounds swamped the moving average (the member's value
        then reflected the end of the previous turn, not its own rounds): in real runs on the
        default set's code-heavy mix, memspec learning that way ran 0.89-0.92x memspec not learning,
        and 1.03x with the replay left out (4-6 sessions each, 2026-12-07). As one vote per turn it
        is a slow prior that the member's own rounds correct (0.96x in the same comparison, inside
        its session-to-session spread; level in simulation)."""
        if not rounds:
            return
        self.replayed_turns += 1
        matched = [(p, a) for p, a in rounds if p > 0]
        self._move(len(matched) / len(rounds),
                   sum(a for _, a in matched) / sum(p for p, _ in matched) if matched else None)

    def _move(self, hit: float, acceptance: float | None) -> None:
        """One step of both moving averages (acceptance only when something was proposed)."""
        self.hit += self.alpha * (hit - self.hit)
        if acceptance is not None:
            self.acceptance += self.alpha * (acceptance - self.acceptance)

    def on_match(self, k: int, step_s: float, verify_s: float) -> LengthChoice:
        """Best proposal length and tokens/s of a round whose lookup matched."""
        return best_length(per_token_acceptance(self.acceptance, k), step_s, verify_s, k)


def ngram_rounds(proposer: NgramProposer, context: Sequence[int], start: int, k: int) -> list[tuple[int, int]]:
    """``(proposed, accepted)`` of greedy rounds with ``proposer`` over ``context[start:]``, replayed
    teacher-forced: what running the member on every round of a served turn would have done."""
    rounds: list[tuple[int, int]] = []
    pos = max(1, start)
    while pos < len(context):
        proposal = proposer.propose(context[:pos], proposal_length(k, len(context) - pos), GREEDY).tokens
        accepted = accepted_prefix(proposal, context[pos:pos + len(proposal)])
        rounds.append((len(proposal), accepted))
        pos += accepted + 1
    return rounds
