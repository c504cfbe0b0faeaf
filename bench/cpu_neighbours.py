"""CPU-bound neighbour processes: a robot computer's other nodes, for a benchmark run beside them.

A robot's CPU is shared: perception, planning and logging nodes keep cores busy while the
dialogue node decodes. ``--cpu-neighbours N`` runs the whole benchmark beside ``N`` processes
that spin on a core each (plain Python busy loops at normal priority), so every configuration,
target-only included, is measured on the busy machine, side by side as always. The processes
end with the run, however it ends.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

SPIN = "while True:\n    pass\n"


@contextmanager
def cpu_neighbours(count: int) -> Iterator[list[int]]:
    """Start ``count`` busy processes for the duration of the block; yields their pids."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL) for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
