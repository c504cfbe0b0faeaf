"""Per-round statistics.

One :class:`RoundStats` per speculative round is the raw material for everything above the
core layer: acceptance rates per draft feed the scheduling policies and the predictor, the
timings calibrate the simulator's cost model, and the catch-up figures quantify what
switching drafts costs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class RoundStats:
    """What one round did and what it cost.

    Attributes:
        draft_name: the draft that proposed, or ``None`` for a target-only round.
        proposed: draft tokens proposed (may be less than the requested k near the end).
        accepted: proposed tokens the target accepted.
        emitted: tokens appended to the output (accepted + the target's own token, possibly
            truncated by ``max_new_tokens`` or stopped early by end-of-sequence).
        draft_seconds: wall time of the draft's work, *including* catch-up.
        verify_seconds: wall time of the target's scoring pass plus acceptance.
        catchup_tokens: context tokens the draft had not seen and had to process before
            proposing, beyond the one new token every round feeds anyway.
        catchup_seconds: wall time of that catch-up forward (0 when there was none).
    """

    draft_name: str | None
    proposed: int
    accepted: int
    emitted: int
    draft_seconds: float
    verify_seconds: float
    catchup_tokens: int
    catchup_seconds: float

    @property
    def seconds(self) -> float:
        """Total wall time of the round."""
        return self.draft_seconds + self.verify_seconds

    @property
    def acceptance_rate(self) -> float | None:
        """accepted / proposed, or ``None`` when nothing was proposed."""
        return self.accepted / self.proposed if self.proposed else None

    def as_dict(self) -> dict:
        """Plain-dict form for logging and ROS message filling."""
        return asdict(self)
