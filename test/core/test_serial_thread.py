"""A helper thread made serial runs torch operators without starting a thread team, and leaves
every other thread's count alone (the draft loader's guarantee to the decoding thread)."""

from __future__ import annotations

import os
import threading

import torch

from memspec_ros.core.serial_thread import make_this_thread_serial


def _os_threads() -> set[str]:
    """The process's OS thread ids: compared as sets, a thread of an earlier test that ends
    meanwhile cannot hide a new one (a count did once: -1)."""
    return set(os.listdir("/proc/self/task"))


def test_serial_helper_starts_no_team_and_leaves_other_threads_alone() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.ones(2_000_000).add_(1)  # this thread's team exists now
        seen: dict[str, int] = {}

        def helper() -> None:
            make_this_thread_serial()
            seen["helper"] = torch.get_num_threads()
            torch.ones(8).add_(1)  # any lazy per-thread set-up of torch happens before counting (too small to split)
            start = _os_threads()
            torch.ones(2_000_000).add_(1)  # a parallel-sized operator...
            torch.rand(64, 64) @ torch.rand(64, 64)  # ...and a matmul (MKL's own team)
            seen["new_os_threads"] = len(_os_threads() - start)

        t = threading.Thread(target=helper)
        t.start()
        t.join()
        fresh: dict[str, int] = {}
        t = threading.Thread(target=lambda: fresh.setdefault("n", torch.get_num_threads()))
        t.start()
        t.join()
        assert seen["helper"] == 1
        assert seen["new_os_threads"] == 0, "the serial thread started worker threads"
        assert torch.get_num_threads() == 2, "the calling thread's count changed"
        assert fresh["n"] == 2, "new threads no longer start with the process-wide count"
    finally:
        torch.set_num_threads(before)
