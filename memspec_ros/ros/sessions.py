"""Dialogue sessions the node keeps across goals, bounded and least-recently-used.

A robot conversation spans many goals; keeping each session's :class:`Conversation`
(the target's KV cache included) means a new turn only prefills the new words. Memory is
bounded by ``max_sessions``: the least recently used session is dropped beyond it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from memspec_ros.runtime.runtime import Conversation, DraftRuntime


class SessionStore:
    """session_id -> Conversation, at most ``capacity`` of them."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._sessions: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str) -> Conversation | None:
        """The session, or None if unknown (never seen, or dropped as least recently used)."""
        with self._lock:
            conv = self._sessions.get(session_id)
            if conv is not None:
                self._sessions.move_to_end(session_id)
            return conv

    def open(self, session_id: str, runtime: DraftRuntime) -> Conversation:
        """The session's conversation; a new one for an empty id (one-shot) or an unknown id."""
        if not session_id:
            return runtime.new_conversation()
        with self._lock:
            conv = self._sessions.get(session_id)
            if conv is None:
                conv = runtime.new_conversation()
                self._sessions[session_id] = conv
                while len(self._sessions) > self.capacity:
                    self._sessions.popitem(last=False)
            self._sessions.move_to_end(session_id)
            return conv

    def drop(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def clear(self) -> None:
        with self._lock:
            self._sessions.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
