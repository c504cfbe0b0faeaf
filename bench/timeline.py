"""A session's residency timeline: which draft ran, which were resident or loading, and when.

The runtime's per-round :class:`~memspec_ros.runtime.RoundEvent` s are relative to their turn's
start; this puts them on one session clock (turns back to back, as the session ran) and keeps
the turns' domains so that topic shifts can be marked. The result is plain JSON, so the plot
can be redrawn from ``results.json`` alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from memspec_ros.runtime import GenerationReport

from .workloads import ScriptedDialogue


def session_timeline(policy: str, session: ScriptedDialogue, reports: Sequence[GenerationReport]) -> dict[str, object]:
    """``{"policy", "session", "turns": [{start, end, domain}], "rounds": [...]}`` on one clock."""
    turns: list[dict[str, object]] = []
    rounds: list[dict[str, object]] = []
    offset = 0.0
    for turn, rep in zip(session.turns, reports, strict=True):
        turns.append({"start": offset, "end": offset + rep.wall_s, "domain": turn.domain})
        for ev in rep.timeline:
            rounds.append({"start": offset + ev.start, "end": offset + ev.end, "draft": ev.draft,
                           "resident": list(ev.resident), "loading": list(ev.loading),
                           "stall_s": ev.stall_s, "accepted": ev.accepted, "proposed": ev.proposed})
        offset += rep.wall_s
    return {"policy": policy, "session": session.name, "shift_every": session.shift_every, "turns": turns,
            "rounds": rounds}
