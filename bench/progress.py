"""Progress for long runs: a tqdm bar per phase when tqdm is installed, plain lines otherwise.

Progress goes to stderr, so stdout stays clean: the last line a run prints on stdout is the
path of its results JSON, which scripts can capture with ``tail -n 1``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Step(Protocol):
    """Advance a phase by one unit of work, naming what was just done."""

    def __call__(self, what: str = "") -> None: ...


class Progress:
    """Phases with a known amount of work; records how long each phase took."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.t0 = time.perf_counter()
        self.phase_seconds: dict[str, float] = {}
        try:
            import tqdm  # noqa: F401

            self._tqdm = enabled and sys.stderr.isatty()
        except ImportError:
            self._tqdm = False

    def log(self, message: str) -> None:
        """A timestamped line on stderr."""
        if self.enabled:
            print(f"[{time.perf_counter() - self.t0:6.1f}s] {message}", file=sys.stderr, flush=True)

    @contextmanager
    def phase(self, name: str, total: int) -> Iterator[Step]:
        """``with progress.phase("headline", n) as step: ... step("memspec session-0")``."""
        start = time.perf_counter()
        done = [0]
        if self._tqdm:
            from tqdm import tqdm

            bar = tqdm(total=total, desc=name, file=sys.stderr, leave=True, dynamic_ncols=True)

            def step(what: str = "") -> None:
                bar.set_postfix_str(what[:40], refresh=False)
                bar.update(1)

            try:
                yield step
            finally:
                bar.close()
        else:
            every = max(1, total // 10)

            def step(what: str = "") -> None:
                done[0] += 1
                if done[0] % every == 0 or done[0] == total:
                    self.log(f"{name} {done[0]}/{total} {what}")

            yield step
        self.phase_seconds[name] = time.perf_counter() - start
        self.log(f"{name}: done in {self.phase_seconds[name]:.1f}s")
