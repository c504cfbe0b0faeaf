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
        self._thread = threading.Thread(target=self._serve, name="memspec-torch", daemon=True)
        self._thread.start()

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the torch thread; its result, or its exception re-raised here."""
        if not self._thread.is_alive():
            raise RuntimeError("the node's torch thread has been closed")
        future: Future = Future()
        self._jobs.put((functools.partial(fn, *args, **kwargs), future))
        return future.result()

    def close(self) -> None:
        """End the thread once what it runs has returned (the node is being destroyed)."""
        self._jobs.put(None)

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the waiting caller, which handles it as before
                future.set_exception(exc)
