"""Exact greedy traces of the workload's sessions, recorded once and kept between runs.

A trace (``memspec_ros.runtime.traces``) is what the oracle policy and the simulator need: the
target's greedy tokens of a conversation and, for every draft, which of them it would have
proposed. A session is one or more conversations (:attr:`ScriptedDialogue.conversations`), so its traces
are a :class:`DialogueTraces`, one ``DialogueTrace`` per conversation. Recording costs one greedy
run plus one teacher-forced pass per draft, so traces are cached on disk, keyed by the zoo's
weights and the conversation's exact prompts and token limits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memspec_ros.runtime.traces import DialogueTrace, Turn, TurnTrace, record_dialogue

from .testbed import Testbed
from .workloads import ScriptedDialogue


@dataclass
class DialogueTraces:
    """A session's exact traces, one per conversation, in order."""

    name: str
    conversations: list[DialogueTrace]

    @property
    def turns(self) -> list[TurnTrace]:
        """Every turn of the session, in order."""
        return [t for c in self.conversations for t in c.turns]

    @property
    def generated_tokens(self) -> int:
        """Tokens the target generated over the session."""
        return sum(c.generated_tokens for c in self.conversations)

    def context_tokens(self) -> list[int]:
        """The session's token ids (prompts and outputs), conversation after conversation."""
        ids: list[int] = []
        for conv in self.conversations:
            contexts = list(conv.turn_contexts())
            if contexts:
                turn, context = contexts[-1]
                ids += [*context, *turn.output_ids]
        return ids

    def prefix(self, n_turns: int) -> DialogueTraces:
        """The traces of the session's first ``n_turns`` turns (exact: later turns never affect earlier ones)."""
        out: list[DialogueTrace] = []
        left = n_turns
        for c in self.conversations:
            if left <= 0:
                break
            out.append(DialogueTrace(c.name, c.turns[:left]))
            left -= len(c.turns)
        return DialogueTraces(f"{self.name}[:{n_turns}]", out)


class ConversationCursor:
    """The oracle's hindsight over a multi-conversation session.

    The runtime numbers turns within a conversation, so whoever runs the session points
    :attr:`index` at the conversation being decoded before it starts.
    """

    def __init__(self, traces: DialogueTraces) -> None:
        self.traces = traces
        self.index = 0

    def accepted(self, draft: str, turn: int, pos: int, k_round: int) -> int:
        """Tokens ``draft`` gets accepted in a round at ``(turn, pos)`` of the current conversation."""
        return self.traces.conversations[self.index].accepted(draft, turn, pos, k_round)


def trace_key(fingerprint: str, turns: Sequence[Turn]) -> str:
    """Cache key: the weights and everything about the conversation that changes its tokens."""
    payload = json.dumps([fingerprint, [[t.prompt, t.max_new_tokens] + ([t.system_prompt] if t.chat else [])
                                        for t in turns]])
    return hashlib.sha1(payload.encode()).hexdigest()[:16]


def _conversation_trace(testbed: Testbed, turns: Sequence[Turn], name: str, cache_dir: Path, k: int
                        ) -> tuple[DialogueTrace, bool]:
    template = testbed.engine.tokenizer.chat_template if any(t.chat for t in turns) else None
    key = trace_key(testbed.fingerprint + (hashlib.sha1(str(template).encode()).hexdigest() if template else ""), turns)
    path = cache_dir / f"trace-{key}.npz"
    trace = None
    if path.exists():
        try:
            trace = DialogueTrace.load(path)
        except (OSError, ValueError, KeyError):
            trace = None
        if trace is not None and (set(trace.drafts) != set(testbed.catalogue.names)
                                  or [t.prompt for t in trace.turns] != [t.prompt for t in turns]):
            trace = None
    if trace is not None:
        trace.name = name
        return trace, True
    trace = record_dialogue(testbed.engine, testbed.proposers, list(turns), name=name, helper=testbed.domain_proposer,
                           k=k)
    trace.save(path)
    return trace, False


def session_traces(testbed: Testbed, sessions: Sequence[ScriptedDialogue], cache_dir: Path, k: int,
                   on_done: Callable[[ScriptedDialogue, bool], None] | None = None) -> list[DialogueTraces]:
    """Traces of every session, from the cache when valid, else recorded (and cached).

    ``on_done(session, all_from_cache)`` reports progress.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    out: list[DialogueTraces] = []
    for session in sessions:
        convs, cached = [], True
        for i, turns in enumerate(session.conversations):
            trace, hit = _conversation_trace(testbed, turns, f"{session.name}/{i}", cache_dir, k)
            convs.append(trace)
            cached &= hit
        out.append(DialogueTraces(session.name, convs))
        if on_done is not None:
            on_done(session, cached)
    return out
