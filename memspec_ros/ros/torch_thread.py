"""One long-lived thread for the node's model work: loading, thread tuning and decoding.

The executor hands callbacks to whichever of its threads is free, so without this a goal
would decode in one thread, the next goal in another, and configure would have loaded the
models and timed the thread counts in a third. With torch's OpenMP every thread that runs a
parallel operator keeps a worker team of its own, and once there are more of those threads
than cores libgomp stops letting idle workers spin between operators, for every team: on the
2-core test machine that doubled a 2-thread round (:mod:`memspec_ros.core.serial_thread`).
Running all of it in one thread keeps one team, the one ``num_threads: 0`` timed at
configure, and the executor thread that waits for the result stays free to answer a cancel.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class TorchThread:
    """Runs functions one at a time on the same thread and waits for each result (exceptions too).

    A daemon thread: a generation that never stops must not keep the process from exiting
    (the node's shutdown then leaves its models to process exit, as it says in its log).
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="memspec-torch", daemon=True)
        self._thread.start()

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the torch thread; its result, or its exception re-raised here."""
        return self.submit(fn, *args, **kwargs).result()

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future:
        """Queue ``fn(*args, **kwargs)`` on the torch thread without waiting (idle-time work: online
        learning); a job queued later runs after it."""
        future: Future = Future()
        with self._lock:  # a job queued behind close() would never run: its caller would wait for good
            if self._closed:
                raise RuntimeError("the node's torch thread has been closed")
            self._jobs.put((functools.partial(fn, *args, **kwargs), future))
        return future

    def close(self, timeout_s: float = 5.0) -> bool:
        """End the thread once what it runs has returned, waiting up to ``timeout_s``; True if it ended.

        The wait matters at process exit: a daemon thread still running when the interpreter
        finalises is stopped with ``pthread_exit`` as soon as it wants the GIL back, and when
        that happens inside torch's C++ (freeing a tensor releases the GIL) the unwinding
        aborts the process ("terminate called without an active exception", seen when the
        thread's last job's KV cache was freed while the node exited).
        """
        with self._lock:
            self._closed = True
            self._jobs.put(None)
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the waiting caller, which handles it as before
                future.set_exception(exc)
            # The caller has its result; holding the job here would keep what it returned
            # (a turn's KV cache) alive until the next job, and free it on this thread whenever.
            del job, fn, future
