"""Progress bars for the long steps of ``memspec_build`` (training, trace recording, evaluation).

A draft build runs for minutes to hours; a bar per step says how far it is and what it is
doing. tqdm comes with the Hugging Face stack the node already needs; bars are drawn only on
a terminal (``disable=None``), so logs and tests get the plain one-line summaries instead.
"""
from __future__ import annotations

from tqdm import tqdm


def budget_bar(total: float, desc: str, unit: str = "s") -> tqdm:
    """A bar over a budget of ``total`` seconds (or steps), advanced with :func:`advance_to`."""
    return tqdm(total=round(float(total), 1), desc=desc, unit=unit, disable=None, leave=False,
                dynamic_ncols=True, bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} {unit} "
                                               "{postfix}")


def advance_to(bar: tqdm, value: float) -> None:
    """Move ``bar`` to ``value`` (clamped to its total); time budgets advance by elapsed time."""
    value = min(float(value), float(bar.total or value))
    if value > bar.n:
        bar.update(value - bar.n)


def count_bar(total: int, desc: str, unit: str = "it") -> tqdm:
    """A bar over ``total`` items (sessions recorded, prompts evaluated)."""
    return tqdm(total=total, desc=desc, unit=unit, disable=None, leave=False, dynamic_ncols=True)
