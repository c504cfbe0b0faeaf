"""The figures reported per policy, measured per session and summed over sessions.

Every run of one configuration on one session - a real runtime, the simulator, target-only
decoding or transformers' assisted generation - becomes a :class:`RunMeasure`. A policy's
headline figures are totals over sessions (tokens/s = all tokens / all seconds, not a mean of
rates, so long sessions weigh what they cost); the per-session rates give the spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from memspec_ros.core.ngram_proposer import NGRAM_NAME
from memspec_ros.runtime import GenerationReport


@dataclass
class RunMeasure:
    """One configuration on one session."""

    session: str
    tokens: int
    wall_s: float
    rounds: int = 0
    proposed: int = 0
    accepted: int = 0
    stall_s: float = 0.0
    switches: int = 0
    loads: int = 0
    peak_memory_bytes: int = 0
    """Most draft bytes in memory at once (loading, resident or being evicted): what the budget limits."""
    draft_s: float = 0.0
    verify_s: float = 0.0
    extra_s: float = 0.0
    """Extra draft passes a policy asked for (HedgeSpec's counterfactual scoring)."""
    outputs_identical: bool | None = None
    """Greedy output equal, token for token, to the target's own (None: not checked)."""
    load_round_ratio: float | None = None
    predictor_fraction: float | None = None
    target_only_rounds: int = 0
    """Rounds run without a draft (nothing useful resident, or the policy judged the target faster)."""
    agreement: float | None = None
    """For a peer that runs the model with other weights or kernels (llama.cpp on the GGUF): the share
    of the target's output tokens it reproduced, each turn up to its first difference."""
    guard_fallbacks: int = 0
    """Times the policy's do-no-harm guard fell back to target-only decoding in this run."""
    tie_turns: int = 0
    """Turns whose output first departs from the target's at a tie of low precision (:mod:`bench.output_check`)."""
    mismatched_turns: int = 0
    """Turns whose output departs from the target's where the target does not tie: not lossless."""
    largest_tie: float = 0.0
    """Largest margin (logits) between the two tokens of a departure counted as a tie."""
    smallest_mismatch: float | None = None
    """Smallest margin (logits) of a departure that was not a tie."""
    guard_fallback_rounds: int = 0
    """Rounds the guard ran target-only in fallback."""
    ngram_rounds: int = 0
    """Rounds the n-gram member proposed in (its lookup matched)."""

    @property
    def tokens_per_s(self) -> float:
        """Tokens per second of this session."""
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0


def with_check(measure: RunMeasure, check) -> RunMeasure:
    """``measure`` with the result of :func:`bench.output_check.check_outputs` for its outputs."""
    measure.outputs_identical = check.exact
    measure.tie_turns, measure.mismatched_turns = check.ties, check.mismatched
    measure.largest_tie, measure.smallest_mismatch = check.largest_tie, check.smallest_mismatch
    return measure


def measure_reports(session: str, reports: Sequence[GenerationReport], *, peak_memory_bytes: int,
                    outputs_identical: bool | None = None, load_round_ratio: float | None = None,
                    predictor_fraction: float | None = None) -> RunMeasure:
    """A :class:`RunMeasure` from the per-turn reports of a real or simulated session."""
    return RunMeasure(
        session=session, tokens=sum(r.tokens for r in reports), wall_s=sum(r.wall_s for r in reports),
        rounds=sum(r.rounds for r in reports), proposed=sum(r.proposed for r in reports),
        accepted=sum(r.accepted for r in reports), stall_s=sum(r.stall_s for r in reports),
        switches=sum(r.switches for r in reports), loads=sum(r.loads for r in reports),
        peak_memory_bytes=peak_memory_bytes,
        draft_s=sum(e.draft_s for r in reports for e in r.timeline),
        verify_s=sum(e.verify_s for r in reports for e in r.timeline),
        extra_s=sum(e.extra_s for r in reports for e in r.timeline),
        outputs_identical=outputs_identical, load_round_ratio=load_round_ratio,
        predictor_fraction=predictor_fraction,
        target_only_rounds=sum(1 for r in reports for e in r.timeline if e.draft is None),
        ngram_rounds=sum(1 for r in reports for e in r.timeline if e.draft == NGRAM_NAME))


@dataclass
class PolicySummary:
    """A configuration's figures over all sessions of an experiment (the JSON ``policies`` entry)."""

    tokens_per_s: float
    acceptance_rate: float | None
    stall_s: float
    mean_accepted_length: float | None
    switches: int
    loads: int
    peak_memory_bytes: int
    tokens: int
    wall_s: float
    session_tokens_per_s: list[float] = field(default_factory=list)
    tokens_per_s_std: float = 0.0
    time_breakdown_s: dict[str, float] = field(default_factory=dict)
    outputs_identical: bool | None = None
    load_round_ratio: float | None = None
    predictor_fraction: float | None = None
    target_only_round_fraction: float | None = None
    output_agreement: float | None = None
    """Token-weighted :attr:`RunMeasure.agreement` (peers that cannot be token-exact)."""
    output_ties: int = 0
    output_mismatches: int = 0
    largest_tie: float = 0.0
    smallest_mismatch: float | None = None
    guard_fallbacks: int = 0
    guard_fallback_round_fraction: float | None = None
    """Share of the rounds the do-no-harm guard ran target-only in fallback (policies with a guard)."""
    ngram_round_fraction: float | None = None
    """Share of the rounds the n-gram member proposed in (runtime configurations)."""

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly."""
        return asdict(self)


def summarize(runs: Sequence[RunMeasure]) -> PolicySummary:
    """Totals over sessions (see the module docstring)."""
    tokens = sum(r.tokens for r in runs)
    wall = sum(r.wall_s for r in runs)
    proposed = sum(r.proposed for r in runs)
    rounds = sum(r.rounds for r in runs)
    rates = [r.tokens_per_s for r in runs]
    checked = [r.outputs_identical for r in runs if r.outputs_identical is not None]
    ratios = [r.load_round_ratio for r in runs if r.load_round_ratio is not None]
    fractions = [r.predictor_fraction for r in runs if r.predictor_fraction is not None]
    engine = sum(r.draft_s + r.verify_s + r.extra_s for r in runs)
    stall = sum(r.stall_s for r in runs)
    breakdown = {"draft_s": sum(r.draft_s for r in runs), "verify_s": sum(r.verify_s for r in runs),
                 "extra_draft_s": sum(r.extra_s for r in runs), "stall_s": stall,
                 "other_s": max(0.0, wall - engine - stall)} if engine > 0 else {}
    return PolicySummary(
        tokens_per_s=tokens / wall if wall > 0 else 0.0,
        acceptance_rate=sum(r.accepted for r in runs) / proposed if proposed else None,
        stall_s=stall, mean_accepted_length=tokens / rounds if rounds else None,
        switches=sum(r.switches for r in runs), loads=sum(r.loads for r in runs),
        peak_memory_bytes=max((r.peak_memory_bytes for r in runs), default=0), tokens=tokens, wall_s=wall,
        session_tokens_per_s=rates, tokens_per_s_std=statistics.pstdev(rates) if len(rates) > 1 else 0.0,
        time_breakdown_s=breakdown, outputs_identical=all(checked) if checked else None,
        load_round_ratio=statistics.fmean(ratios) if ratios else None,
        predictor_fraction=max(fractions) if fractions else None,
        target_only_round_fraction=sum(r.target_only_rounds for r in runs) / rounds if rounds and proposed else None,
        output_agreement=_agreement(runs), output_ties=sum(r.tie_turns for r in runs),
        output_mismatches=sum(r.mismatched_turns for r in runs),
        largest_tie=max((r.largest_tie for r in runs), default=0.0),
        smallest_mismatch=min((r.smallest_mismatch for r in runs if r.smallest_mismatch is not None), default=None),
        guard_fallbacks=sum(r.guard_fallbacks for r in runs),
        guard_fallback_round_fraction=sum(r.guard_fallback_rounds for r in runs) / rounds
        if rounds and any(r.guard_fallbacks for r in runs) else None,
        ngram_round_fraction=sum(r.ngram_rounds for r in runs) / rounds if rounds and proposed else None)


def _agreement(runs: Sequence[RunMeasure]) -> float | None:
    weighted = [(r.agreement, r.tokens) for r in runs if r.agreement is not None]
    total = sum(t for _, t in weighted)
    return sum(a * t for a, t in weighted) / total if total else None
