"""The dialogues the node keeps across goals: owned, bounded and least-recently-used.

Keyed by the goal's ``session_id`` (the ROS interface's word); called a dialogue store so that
it is not confused with the engine's ``DecodeState`` or the runtime's ``Conversation`` (see
:mod:`memspec_ros.runtime.conversation` for the four former "sessions").

A robot conversation spans many goals; keeping each dialogue's :class:`Conversation`
(the target's KV cache included) means a new turn only prefills the new words. Three
things keep that safe on a shared robot network:

* Ownership: a session is bound to the client that opened it by an unguessable token the
  node returns in that goal's result. Another client that guesses the id can neither
  continue the dialogue (reading its context through the model) nor disturb it.
* Memory: KV caches grow with every turn, so sessions have their own byte budget
  (``session_budget_bytes``), enforced least-recently-used, on top of ``max_sessions``.
* Time: a dialogue that went quiet for ``session_idle_timeout_s`` is dropped.

A session that a goal holds (accepted, queued or running) is never dropped: the goal was
accepted on the promise of that context.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from memspec_ros.ros.echo import echo
from memspec_ros.runtime.conversation import Conversation


@dataclass
class StoredDialogue:
    """One kept dialogue: its conversation and who owns it."""

    conversation: Conversation
    token: str
    last_used: float
    holds: int = 0
    """Goals accepted for this session and not yet finished (they pin it)."""


@dataclass(frozen=True)
class Claim:
    """The outcome of :meth:`DialogueStore.claim`: the session's token, or why not."""

    token: str = ""
    problem: str | None = None


@dataclass
class DialogueStore:
    """session_id -> :class:`StoredDialogue`, bounded by count, bytes and idle time."""

    capacity: int
    budget_bytes: int = 0
    """Most bytes of KV cache kept by idle sessions together; 0 = no byte limit."""
    idle_timeout_s: float = 0.0
    """Sessions unused this long are dropped; 0 = never."""
    clock: Callable[[], float] = time.monotonic
    on_drop: Callable[[str, str], None] | None = None
    """Told (session_id, reason) of every session dropped by a limit (for the log)."""
    _sessions: OrderedDict[str, StoredDialogue] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def claim(self, session_id: str, token: str, *, chat: bool = False) -> Claim:
        """At goal time: check ownership of an existing session, or open a new one; pin it.

        ``chat``: the goal sends messages (not a raw prompt). A session is one or the other,
        fixed by the goal that opened it: a chat session's history is its messages, a prompt
        session's is its text, and neither can be continued with the other.

        Every successful claim must be paired with :meth:`release` when the goal ends.
        """
        with self._lock:
            self._expire_locked()
            session = self._sessions.get(session_id)
            if session is not None:
                if not hmac.compare_digest(session.token.encode(), token.encode()):
                    return Claim(problem=(
                        f"session_id {echo(session_id)} belongs to another client: send the session_token "
                        "from the first result of that session, or open a new session with another id"
                    ))
                if session.conversation.is_chat != chat:
                    kind, other = ("messages", "prompt") if session.conversation.is_chat else ("prompt", "messages")
                    return Claim(problem=(
                        f"session_id {echo(session_id)} was opened with {kind}: continue it with {kind}, "
                        f"not {other} (or open a new session)"
                    ))
            else:
                session = StoredDialogue(Conversation(chat=chat), secrets.token_urlsafe(24), self.clock())
                self._sessions[session_id] = session
            session.holds += 1
            session.last_used = self.clock()
            self._sessions.move_to_end(session_id)
            self._enforce_locked()
            return Claim(token=session.token)

    def get(self, session_id: str) -> StoredDialogue | None:
        """The session, or None if unknown (never opened, or dropped by a limit)."""
        with self._lock:
            return self._sessions.get(session_id)

    def release(self, session_id: str) -> None:
        """A goal of this session ended: unpin it and apply the limits again."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None:
                session.holds = max(0, session.holds - 1)
                session.last_used = self.clock()
            self._enforce_locked()

    def expire(self) -> None:
        """Drop sessions idle longer than the timeout (the node calls this periodically)."""
        with self._lock:
            self._expire_locked()

    def clear(self) -> None:
        """Forget every dialogue (cleanup frees the models their KV caches belong to)."""
        with self._lock:
            self._sessions.clear()

    def kv_bytes(self) -> int:
        """Bytes of KV cache all sessions hold now."""
        with self._lock:
            return sum(s.conversation.kv_bytes for s in self._sessions.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._sessions

    # ------------------------------------------------------------------ limits
    def _drop_locked(self, session_id: str, reason: str) -> None:
        del self._sessions[session_id]
        if self.on_drop is not None:
            self.on_drop(session_id, reason)

    def _expire_locked(self) -> None:
        if self.idle_timeout_s <= 0:
            return
        now = self.clock()
        for sid, s in list(self._sessions.items()):
            if not s.holds and now - s.last_used > self.idle_timeout_s:
                self._drop_locked(sid, f"idle for more than session_idle_timeout_s={self.idle_timeout_s:g} s")

    def _enforce_locked(self) -> None:
        """Least recently used first, never a pinned session."""
        idle = [sid for sid, s in self._sessions.items() if not s.holds]  # LRU order
        while len(self._sessions) > self.capacity and idle:
            self._drop_locked(idle.pop(0), f"more than max_sessions={self.capacity} sessions")
        if self.budget_bytes <= 0:
            return
        sizes = {sid: self._sessions[sid].conversation.kv_bytes for sid in idle}
        total = sum(s.conversation.kv_bytes for s in self._sessions.values())
        while total > self.budget_bytes and idle:
            sid = idle.pop(0)
            total -= sizes[sid]
            self._drop_locked(sid, f"session KV caches exceed session_budget_bytes={self.budget_bytes}")
