"""Other work on the machine: every timing of a build measures it too, so the build says so.

``memspec_build`` times the target and the drafts (the sizing, ``evaluate``'s verdicts) and trains
against the clock (every phase has a time budget): a machine whose cores are busy with other
jobs makes drafts smaller, trains them for fewer steps and skews the verdicts. The timings
themselves are made robust (interleaved, repeated), but the user should know before spending
half an hour: ``drafts`` and ``evaluate`` print the load average when it is above 3/4 of the cores.
"""
from __future__ import annotations

import os

BUSY_FACTOR = 0.75
"""Warn when the 1-minute load average exceeds this share of the cores."""


def load_average() -> float | None:
    """The 1-minute load average (None where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def busy_message(command: str, load: float | None, cores: int | None) -> str | None:
    """The warning for ``memspec_build <command>`` at this load, or None on a quiet machine."""
    if load is None or not cores or load <= BUSY_FACTOR * cores:
        return None
    return (f"[{command}] warning: the load average is {load:.1f} on {cores} cores: other work is running, "
            "and this build's timings (draft sizing, the evaluation's speed verdicts) and its training steps per "
            "second suffer. Build on a quiet machine if you can; a sizing measured in a busy spell is flagged, "
            "and --resize measures it again")


def warn_if_busy(command: str) -> None:
    """Print :func:`busy_message` for this machine, if any."""
    message = busy_message(command, load_average(), os.cpu_count())
    if message:
        print(message, flush=True)
