"""The trend of a noisy series: a least-squares slope.

Both soaks (``bench.soak_rounds`` on the runtime, ``test/ros/test_soak.py`` on a node
process) judge memory by its trend, not by end minus start: the allocator makes RSS wobble
by megabytes between samples, while a leak is a steady rise that a fitted slope sees
through the wobble.
"""

from __future__ import annotations

from collections.abc import Sequence


def least_squares_slope(points: Sequence[tuple[float, float]]) -> float:
    """Slope of the least-squares line through ``(x, y)`` points; 0 when x does not vary."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var
