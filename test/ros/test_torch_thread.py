"""The node's torch thread: every job on the same thread, results and exceptions handed back."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import pytest

from memspec_ros.ros.torch_thread import TorchThread


def test_jobs_share_one_thread_and_hand_back_results_and_errors() -> None:
    worker = TorchThread()
    try:
        seen = {worker.run(threading.get_ident) for _ in range(5)}
        callers = set()
        threads = [threading.Thread(target=lambda: callers.add(worker.run(threading.get_ident))) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(seen) == 1 and callers == seen, "jobs from different callers ran on different threads"
        assert seen != {threading.get_ident()}
        assert worker.run(lambda a, b=0: a + b, 2, b=3) == 5
        with pytest.raises(ValueError, match="bad goal"):
            worker.run(lambda: (_ for _ in ()).throw(ValueError("bad goal")))
        assert worker.run(lambda: "still serving") == "still serving"
    finally:
        assert worker.close(), "close() returned before the thread ended"
    with pytest.raises(RuntimeError, match="closed"):
        worker.run(lambda: None)


def test_the_thread_keeps_nothing_a_job_returned() -> None:
    """What a job returned (a turn's KV cache) is the caller's alone: the idle thread holding it
    freed it later on that thread, and at process exit inside torch's C++, which aborted the node."""

    class Result:
        pass

    worker = TorchThread()
    try:
        ref = weakref.ref(worker.run(Result))  # the caller drops the result at once
        deadline = time.monotonic() + 2.0
        while ref() is not None and time.monotonic() < deadline:
            gc.collect()  # the thread lets go just after handing the result over
            time.sleep(0.01)
        assert ref() is None, "the torch thread still holds the last job's result"
    finally:
        assert worker.close()
