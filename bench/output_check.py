"""Is a configuration's output the target's? Token for token, or (low precision) up to ties.

Every configuration's greedy output is compared with the session's exact trace, turn by turn. In
float32 they must be identical. In bfloat16 the verification pass and a one-token step may break a
tie between two tokens differently (:mod:`memspec_ros.core.greedy_ties`): a turn that departs from
the trace is checked where it first departs, and counts as a tie when the target rates both tokens
within ``TIE_STEPS`` bf16 steps there (twice the largest
difference between batchings measured). Later turns of that conversation continue from another (equally
valid) history and are not compared (nor after a real difference). A departure that is not a tie
is a real difference: the run is not lossless, and the report says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memspec_ros.core.greedy_ties import divergence

from .trace_cache import DialogueTraces


@dataclass(frozen=True)
class OutputCheck:
    """Turns by how they compare with the trace."""

    identical: int = 0
    ties: int = 0
    """Turns that first depart from the trace at a tie."""
    not_compared: int = 0
    """Later turns of a conversation that already departed (their history differs)."""
    mismatched: int = 0
    """Turns that depart where the target does not tie: not the target's output."""
    largest_tie: float = 0.0
    """The largest margin (logits) of a departure counted as a tie."""
    smallest_mismatch: float | None = None
    """The smallest margin (logits) of a departure that was not a tie (None: none)."""

    @property
    def lossless(self) -> bool:
        return self.mismatched == 0

    @property
    def exact(self) -> bool:
        return self.ties == 0 and self.not_compared == 0 and self.mismatched == 0


def check_outputs(model, traces: DialogueTraces, outputs: Sequence[Sequence[int]]) -> OutputCheck:
    """Compare ``outputs`` (one per turn of ``traces``, in order) with the traces' outputs."""
    counts = {"identical": 0, "ties": 0, "not_compared": 0, "mismatched": 0}
    largest_tie, smallest_mismatch = 0.0, None
    it = iter(outputs)
    for conv in traces.conversations:
        departed = False
        for turn, context in conv.turn_contexts():
            out = list(next(it))
            if departed:
                counts["not_compared"] += 1
                continue
            d = divergence(model, context, turn.output_ids, out)
            if d is None:
                counts["identical"] += 1
            elif d.is_tie:
                counts["ties"] += 1
                largest_tie = max(largest_tie, abs(d.margin))
                departed = True
            else:
                counts["mismatched"] += 1
                smallest_mismatch = abs(d.margin) if smallest_mismatch is None else min(smallest_mismatch,
                                                                                        abs(d.margin))
                departed = True
    return OutputCheck(**counts, largest_tie=largest_tie, smallest_mismatch=smallest_mismatch)
