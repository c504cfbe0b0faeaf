"""rclpy's ``ActionClient``, safe to create while its node's executor spins in another thread.

``ActionClient.__init__`` adds itself to the node, where a spinning executor sees it at once,
and only then creates ``_lock``, which the executor's wait-set calls (``get_num_entities``,
``add_to_wait_set``) take (ros2/rclpy#1589, in Humble to Rolling). Every tool and test here
creates its client on a node that already spins, so the executor sometimes met the client
half-built: "'ActionClient' object has no attribute '_lock'" out of ``spin()``, and with it
the goal's answer never read (a CI run failed on this). The subclass creates the lock first.
"""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient


class RaceFreeActionClient(ActionClient):
    """An ``ActionClient`` whose lock exists before the client is visible to an executor."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._early_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def _lock(self) -> threading.Lock:
        return self._early_lock

    @_lock.setter
    def _lock(self, late_lock: threading.Lock) -> None:
        """Ignore the lock ``ActionClient.__init__`` makes last: the executor may already hold
        the early one, and two locks would no longer exclude each other. A lock of another
        kind (an ``RLock`` taken re-entrantly) would deadlock on ours: refuse it loudly."""
        if type(late_lock) is not type(self._early_lock):
            raise TypeError(f"rclpy's ActionClient now makes a {type(late_lock).__name__} lock; make "
                            "RaceFreeActionClient create the same kind (or drop it if ros2/rclpy#1589 is fixed)")
