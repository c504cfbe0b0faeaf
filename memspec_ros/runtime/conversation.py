"""A dialogue the runtime continues across turns, and the checkpoint that undoes a failed turn.

Four things in this project were once all called a "session"; each now has its own name:

* :class:`~memspec_ros.core.engine.DecodeState` (core): the engine's decoding state of one
  dialogue - committed tokens, the target's KV cache, the current turn's outputs.
* :class:`Conversation` (runtime, here): a dialogue as the runtime sees it - a ``DecodeState``
  once the first turn ran, and how many turns it has had. Sliding and rollback act on it.
* :class:`~memspec_ros.ros.dialogue_store.DialogueStore` (ROS): the node's owned, bounded
  store of conversations, keyed by the goal's ``session_id`` (the interface field keeps its name).
* :class:`~bench.workloads.ScriptedDialogue` (bench): a scripted multi-domain dialogue the
  benchmarks replay, with its exact trace (:class:`~memspec_ros.runtime.traces.DialogueTrace`).
"""

from __future__ import annotations

from dataclasses import dataclass

from memspec_ros.core.engine import DecodeState, SpeculativeEngine
from memspec_ros.core.finish_reason import FinishReason
from memspec_ros.core.sampling import GREEDY

from .chat import ChatMessage


@dataclass(frozen=True)
class TurnCheckpoint:
    """Where a conversation stood after its last completed turn (see :meth:`Conversation.restore`)."""

    state: DecodeState | None
    length: int
    turns: int
    turn_start: int
    finish_reason: FinishReason | None
    messages: tuple[ChatMessage, ...]
    stored_ids: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ConversationRecord:
    """What rebuilds a conversation exactly in another process (a restarted node).

    The tokens the target has seen, not only the text: a prompt session's history is its tokens
    (a sampled answer may be split into tokens the way the tokenizer would not split its text),
    and the next turn must continue exactly those. A chat conversation also keeps its messages,
    which its next turn renders. The KV cache is not stored: one prefill of ``token_ids``
    rebuilds it (:meth:`Conversation.rebuild`), cheaper than the bytes it would take on disk.
    """

    chat: bool
    turns: int
    token_ids: tuple[int, ...]
    messages: tuple[ChatMessage, ...] = ()


class Conversation:
    """A dialogue whose context the target keeps across :meth:`DraftRuntime.generate` calls.

    A chat conversation (``is_chat``) also keeps its messages, its own answers included: they,
    not the tokens, are the history its next turn renders (:mod:`.chat`); the tokens and the KV
    cache are what the target has already seen of them.
    """

    def __init__(self, *, chat: bool = False) -> None:
        self.state: DecodeState | None = None
        self.turns = 0
        self.is_chat = chat
        self.messages: list[ChatMessage] = []
        self.stored_ids: tuple[int, ...] | None = None
        """Tokens of a conversation restored from a :class:`ConversationRecord` whose KV cache is
        not built yet (:meth:`rebuild` does it when its next turn runs)."""

    @classmethod
    def from_record(cls, record: ConversationRecord) -> Conversation:
        """The conversation ``record`` describes; its cache is rebuilt by its next turn."""
        conversation = cls(chat=record.chat)
        conversation.turns = record.turns
        conversation.messages = list(record.messages)
        conversation.stored_ids = tuple(record.token_ids) or None
        return conversation

    def record(self) -> ConversationRecord:
        """What :meth:`from_record` needs to continue this conversation exactly (after a completed turn)."""
        ids = tuple(self.state.token_ids) if self.state is not None else (self.stored_ids or ())
        return ConversationRecord(chat=self.is_chat, turns=self.turns, token_ids=ids, messages=tuple(self.messages))

    def rebuild(self, engine: SpeculativeEngine) -> None:
        """Prefill a restored conversation's tokens: its KV cache, as the previous process had it.

        The target then holds exactly the context it had after the last completed turn, so the
        next turn continues as it would have without the restart. Tokens that no longer fit the
        window (a node restarted with a smaller ``max_context``) are not prefilled: a chat
        conversation re-renders its messages (the turn slides them), a prompt conversation
        keeps its latest tokens, as a slide would.
        """
        ids, self.stored_ids = self.stored_ids, None
        if self.state is not None or not ids:
            return
        if len(ids) >= engine.max_context:
            if self.is_chat:
                return
            ids = tuple(engine.opening(ids[len(ids) - engine.max_context // 2:]))
        state = DecodeState(engine, list(ids), 1, GREEDY)
        state.finish_reason = FinishReason.LENGTH  # the restored turn is complete; the next continues it
        self.state = state

    @property
    def context_tokens(self) -> int:
        """Tokens in the dialogue so far."""
        if self.state is None:
            return len(self.stored_ids or ())
        return len(self.state.token_ids)

    @property
    def kv_bytes(self) -> int:
        """Bytes of the target KV cache this dialogue keeps alive between turns."""
        return self.state.scorer.cache_bytes if self.state is not None else 0

    def reset(self) -> None:
        """Forget the context (the next turn opens a new dialogue); a checkpoint still restores it."""
        self.state = None
        self.turns = 0
        self.stored_ids = None

    def forget(self) -> None:
        """Forget everything, messages included (a client reset its session)."""
        self.reset()
        self.messages = []

    def checkpoint(self) -> TurnCheckpoint:
        """Remember the state after the last completed turn, before a new one starts."""
        s = self.state
        return TurnCheckpoint(state=s, length=len(s.token_ids) if s else 0, turns=self.turns,
                              turn_start=s.turn_start if s else 0, finish_reason=s.finish_reason if s else None,
                              messages=tuple(self.messages), stored_ids=self.stored_ids)

    def restore(self, checkpoint: TurnCheckpoint) -> None:
        """Undo a turn that failed half-way: the dialogue continues from its last completed turn.

        Without this a turn that raised (a bad round, an interrupted prefill) left the dialogue
        mid-turn, and every later turn was refused as "still running". The committed tokens and
        the KV cache are cut back to the checkpoint (the cache mirrors all committed tokens but
        the last), so the next turn prefills exactly as if the failed one never happened.

        A chat turn may have cut the cache *below* the checkpoint (a history rendered
        differently, :mod:`.chat`) before it failed; those tokens are gone, so the state is
        dropped and the next turn renders the restored messages from scratch. If the failed
        turn got further, the tokens kept up to the checkpoint's length may be the failed
        turn's rendering rather than the old ones; they match the cache, and the next chat
        turn keeps only what agrees with its own rendering, so that is still exact.
        """
        self.state, self.turns = checkpoint.state, checkpoint.turns
        self.messages = list(checkpoint.messages)
        self.stored_ids = checkpoint.stored_ids
        s = checkpoint.state
        if s is None:
            return
        if len(s.token_ids) < checkpoint.length:
            self.state = None
            return
        del s.token_ids[checkpoint.length:]
        s.scorer.truncate(max(0, checkpoint.length - 1))
        s.turn_start = min(checkpoint.turn_start, checkpoint.length)
        s.finish_reason = checkpoint.finish_reason or FinishReason.ERROR
