"""Keep a helper thread's torch work out of OpenMP thread teams.

torch's CPU wheels parallelise operators with GNU OpenMP, and every thread that runs a
parallel operator gets a team of worker threads of its own, kept for the thread's lifetime.
Once libgomp manages more threads than there are cores, it stops letting idle workers spin
between operators and puts them to sleep almost at once, for *every* team: each of the many small
operators of a decoding step then pays a wake-up. Measured on the 2-core test machine at 2
torch threads: one large copy in a second, long-lived thread (what the draft loader does
when it materialises a draft) took the main thread's speculative round from 15 ms to 27 ms
for the rest of the process, the slowdown that had made two threads lose to one in the
runtime while plain target-only decoding gained.

``torch.set_num_threads`` sets the calling thread's OpenMP and MKL counts (the MKL one matters
too: a draft's rotary table is a small matmul, and MKL starts its own OpenMP team for it) and
also the process-wide count that new threads start with. So a helper thread calls it with 1,
and a throw-away thread, which runs no operator and so never gets a team, puts the
process-wide count back. Torch then runs the helper's operators inline, no team is created,
and the decoding thread keeps its team and its speed. A draft's materialisation is a few
megabytes of copies; done serially it costs the loader a few milliseconds, off the decoding
thread. (A thread that starts its first torch operator during the few microseconds between
the two calls would start serial too: slower, never wrong.)
"""

from __future__ import annotations

import threading

import torch


def make_this_thread_serial() -> None:
    """Run this thread's torch operators without a thread team; other threads keep theirs.

    Call it first thing in a long-lived helper thread (the draft loader).
    """
    process_wide = torch.get_num_threads()
    torch.set_num_threads(1)  # this thread: OpenMP and MKL counts 1; the process-wide count too, until...
    restore = threading.Thread(target=torch.set_num_threads, args=(process_wide,), name="restore-torch-threads")
    restore.start()  # ...this thread, which runs no operator, puts it back
    restore.join()
