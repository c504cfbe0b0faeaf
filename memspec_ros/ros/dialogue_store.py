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

With a :class:`SessionFileStore` (``session_dir``) every session is also a file, written after
each completed turn (:meth:`DialogueStore.persist`) and deleted when the session is dropped
or closed, so the limits bound the disk as they bound memory, and a restarted node continues
the sessions it loads (:meth:`DialogueStore.restore`). A session dropped by a limit or closed
leaves a bounded trace (its id, its token's digest and why), so that when its owner comes back
the result says why the dialogue starts over instead of silently starting fresh.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memspec_ros.ros.echo import echo
from memspec_ros.ros.session_files import SavedSession, SessionFileStore
from memspec_ros.runtime.conversation import Conversation

RESET, CLOSED, EXPIRED, EVICTED, UNKNOWN = "reset", "closed", "expired", "evicted", "unknown"
"""Values of the Generate result's ``session_restart_reason``."""


def token_digest(token: str) -> str:
    """Hex SHA-256 of a session token: what ownership is checked against, and all a file keeps.

    Tokens are 24 random bytes, so a plain digest cannot be reversed by trying candidates."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class StoredDialogue:
    """One kept dialogue: its conversation and who owns it."""

    conversation: Conversation
    token_digest: str
    last_used: float
    token: str = ""
    """The token itself, returned in results; empty for a session restored from disk until its
    owner proves it by sending it."""
    holds: int = 0
    """Goals accepted for this session and not yet finished (they pin it)."""
    last_used_wall: float = field(default_factory=time.time)
    restart_reason: str = ""
    """Why this session's context started over (``reset``, ``expired``, ...); told in the result
    of its next turn, then cleared."""


@dataclass(frozen=True)
class Tombstone:
    """What is left of a dropped session: whose it was and why it went."""

    token_digest: str
    reason: str


@dataclass(frozen=True)
class SessionSummary:
    """One session as ``~/list_sessions`` shows it (no token, no text)."""

    session_id: str
    chat: bool
    turns: int
    tokens: int
    last_used_wall: float
    busy: bool


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
    files: SessionFileStore | None = None
    """Where sessions are written (``session_dir``); None = memory only."""
    on_file_error: Callable[[str, Exception], None] | None = None
    """Told (what, error) when writing or deleting a session file failed (the session goes on)."""
    _sessions: OrderedDict[str, StoredDialogue] = field(default_factory=OrderedDict)
    _tombstones: OrderedDict[str, Tombstone] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def tombstone_limit(self) -> int:
        """Dropped sessions remembered (oldest forgotten first): a bounded trace, a few bytes each."""
        return 4 * self.capacity + 64

    def claim(self, session_id: str, token: str, *, chat: bool = False) -> Claim:
        """At goal time: check ownership of an existing session, or open a new one; pin it.

        ``chat``: the goal sends messages (not a raw prompt). A session is one or the other,
        fixed by the goal that opened it: a chat session's history is its messages, a prompt
        session's is its text, and neither can be continued with the other.

        A new session for an id the store dropped earlier carries why (its ``restart_reason``)
        when the goal sends the old session's token; a token for an id the store knows nothing
        about gives ``unknown``.

        Every successful claim must be paired with :meth:`release` when the goal ends.
        """
        with self._lock:
            self._expire_locked()
            session = self._sessions.get(session_id)
            if session is not None:
                if not self._owns(session.token_digest, token):
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
                session.token = token  # proven: a session restored from disk learns it here
            else:
                tomb = self._tombstones.pop(session_id, None)
                reason = ""
                if token:
                    reason = tomb.reason if tomb is not None and self._owns(tomb.token_digest, token) else UNKNOWN
                new_token = secrets.token_urlsafe(24)
                session = StoredDialogue(Conversation(chat=chat), token_digest(new_token), self.clock(),
                                         token=new_token, restart_reason=reason)
                self._sessions[session_id] = session
            session.holds += 1
            session.last_used = self.clock()
            session.last_used_wall = time.time()
            self._sessions.move_to_end(session_id)
            self._enforce_locked()
            return Claim(token=session.token)

    @staticmethod
    def _owns(digest: str, token: str) -> bool:
        return hmac.compare_digest(digest.encode(), token_digest(token).encode())

    def _check_owner_locked(self, session_id: str, token: str, action: str) -> tuple[StoredDialogue | None, str]:
        """The session if ``token`` owns it and no goal holds it; else why not."""
        session = self._sessions.get(session_id)
        if session is None:
            return None, f"no session {echo(session_id)} (never opened, closed or dropped)"
        if not self._owns(session.token_digest, token):
            return None, f"session_id {echo(session_id)} belongs to another client: send its session_token"
        if session.holds:
            return None, (f"a goal of session {echo(session_id)} is queued or running: cancel it or wait "
                          f"for its result, then {action} the session")
        return session, ""

    def reset(self, session_id: str, token: str) -> str | None:
        """Forget the session's context but keep it (id and token); None, or why not."""
        with self._lock:
            session, problem = self._check_owner_locked(session_id, token, "reset")
            if session is None:
                return problem
            session.conversation.forget()
            session.restart_reason = RESET
            session.last_used, session.last_used_wall = self.clock(), time.time()
            self._sessions.move_to_end(session_id)
            self._write_locked(session_id, session)
            return None

    def close(self, session_id: str, token: str) -> str | None:
        """Drop the session and its file; None, or why not."""
        with self._lock:
            session, problem = self._check_owner_locked(session_id, token, "close")
            if session is None:
                return problem
            self._drop_locked(session_id, CLOSED, None)
            return None

    def persist(self, session_id: str) -> None:
        """After a completed turn: write the session's file (no-op without ``files``)."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None:
                self._write_locked(session_id, session)

    def restore(self, saved: Sequence[SavedSession]) -> None:
        """Take in sessions loaded from disk (oldest first), then apply the limits (a session
        idle too long, or beyond ``max_sessions``, is dropped and its file deleted)."""
        now, wall = self.clock(), time.time()
        with self._lock:
            for s in saved:
                if s.session_id in self._sessions:
                    continue
                idle = max(0.0, wall - s.last_used)
                self._sessions[s.session_id] = StoredDialogue(
                    Conversation.from_record(s.conversation), s.token_digest, now - idle,
                    last_used_wall=s.last_used)
            self._expire_locked()
            self._enforce_locked()

    def summaries(self) -> list[SessionSummary]:
        """Every session, least recently used first."""
        with self._lock:
            return [SessionSummary(sid, s.conversation.is_chat, s.conversation.turns,
                                   s.conversation.context_tokens, s.last_used_wall, s.holds > 0)
                    for sid, s in self._sessions.items()]

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
        """Forget every dialogue (cleanup frees the models their KV caches belong to).

        Their files stay: a durable session survives a cleanup as it survives a restart."""
        with self._lock:
            self._sessions.clear()
            self._tombstones.clear()

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
    def _drop_locked(self, session_id: str, kind: str, reason: str | None) -> None:
        """Drop a session (memory and file), remember why for its owner; log ``reason`` if given."""
        session = self._sessions.pop(session_id)
        self._tombstones[session_id] = Tombstone(session.token_digest, kind)
        self._tombstones.move_to_end(session_id)
        while len(self._tombstones) > self.tombstone_limit:
            self._tombstones.popitem(last=False)
        if self.files is not None:
            try:
                self.files.delete(session_id)
            except OSError as exc:
                self._file_error(f"deleting the file of session {echo(session_id)}", exc)
        if reason is not None and self.on_drop is not None:
            self.on_drop(session_id, reason)

    def _write_locked(self, session_id: str, session: StoredDialogue) -> None:
        if self.files is None:
            return
        try:
            self.files.save(SavedSession(session_id, session.token_digest, session.conversation.record(),
                                         session.last_used_wall))
        except OSError as exc:
            self._file_error(f"writing the file of session {echo(session_id)}", exc)

    def _file_error(self, what: str, exc: Exception) -> None:
        if self.on_file_error is not None:
            self.on_file_error(what, exc)

    def _expire_locked(self) -> None:
        if self.idle_timeout_s <= 0:
            return
        now = self.clock()
        for sid, s in list(self._sessions.items()):
            if not s.holds and now - s.last_used > self.idle_timeout_s:
                self._drop_locked(sid, EXPIRED,
                                  f"idle for more than session_idle_timeout_s={self.idle_timeout_s:g} s")

    def _enforce_locked(self) -> None:
        """Least recently used first, never a pinned session."""
        idle = [sid for sid, s in self._sessions.items() if not s.holds]  # LRU order
        while len(self._sessions) > self.capacity and idle:
            self._drop_locked(idle.pop(0), EVICTED, f"more than max_sessions={self.capacity} sessions")
        if self.budget_bytes <= 0:
            return
        sizes = {sid: self._sessions[sid].conversation.kv_bytes for sid in idle}
        total = sum(s.conversation.kv_bytes for s in self._sessions.values())
        while total > self.budget_bytes and idle:
            sid = idle.pop(0)
            total -= sizes[sid]
            self._drop_locked(sid, EVICTED, f"session KV caches exceed session_budget_bytes={self.budget_bytes}")
