"""Multi-domain dialogue workloads: sessions whose turns move between domains.

A robot's conversation drifts - a command, a bit of code, a unit conversion, a licence
question - and that drift is what makes a pool of specialised drafts worth managing. A session
here is a sequence of turns, each a prompt from one domain, chosen so that consecutive turns
change domain (a topic shift every ``shift_every`` turns). Prompts are drawn deterministically
from a seed, without replacement, so every policy sees exactly the same workload.

Evaluation sessions use the held-out prompts (``heldout/prompts.jsonl`` of a catalogue folder,
``models/zoo/heldout`` for the bundled zoo); the predictor is trained on sessions built the same
way from *training* documents (``memspec_build predictor``), never from these.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .traces import Turn


@dataclass(frozen=True)
class ChatStyle:
    """How a workload's prompts reach the target: raw text, or user messages of chat conversations.

    ``memspec_build`` writes chat prompts (``{"domain", "prompt", "messages"}`` rows) for corpora
    given as conversations: the workload then sends each prompt's last user message, with the
    system prompt of its conversation, through the target's chat template, as a robot's dialogue
    manager sends chat goals to the node.
    """

    chat: bool = False
    system_prompt: str = ""

    def turn(self, prompt: str, max_new_tokens: int, domain: str | None) -> Turn:
        """A workload turn in this style."""
        return Turn(prompt=prompt, max_new_tokens=max_new_tokens, domain=domain, chat=self.chat,
                    system_prompt=self.system_prompt)


RAW = ChatStyle()


def chat_row_parts(messages: Sequence[Sequence[str]]) -> tuple[str, str]:
    """``(system prompt or "", last user message)`` of a chat prompt row's messages."""
    system = next((c for r, c in messages if r == "system"), "")
    user = next((c for r, c in reversed(messages) if r == "user"), None)
    if user is None:
        raise ValueError("a chat prompt needs a user message")
    return system, user


def load_chat_style(path: Path | str) -> ChatStyle:
    """The style of a ``prompts.jsonl``: chat if its rows carry ``messages`` (then every row must,
    with one system prompt), raw text otherwise."""
    systems: set[str] = set()
    chat_rows = rows = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                rows += 1
                if "messages" in row:
                    chat_rows += 1
                    systems.add(chat_row_parts(row["messages"])[0])
    if chat_rows and chat_rows != rows:
        raise ValueError(f"{path} mixes chat prompts (with messages) and text prompts: use one kind")
    if len(systems) > 1:
        raise ValueError(f"{path}: chat prompts with {len(systems)} different system prompts; a workload sends one")
    return ChatStyle(True, systems.pop()) if chat_rows else RAW


def load_prompts(path: Path | str) -> dict[str, list[str]]:
    """Read a ``prompts.jsonl`` of ``{"domain", "prompt"}`` rows into ``{domain: [prompt, ...]}``.

    A chat row (with ``messages``) contributes its last user message (:func:`load_chat_style`).
    """
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                text = chat_row_parts(row["messages"])[1] if "messages" in row else row["prompt"]
                out.setdefault(row["domain"], []).append(text)
    return out


def multi_domain_dialogues(
    prompts: Mapping[str, Sequence[str]],
    *,
    sessions: int,
    turns: int,
    max_new_tokens: int,
    seed: int = 0,
    shift_every: int = 1,
    domains: Sequence[str] | None = None,
    style: ChatStyle = RAW,
) -> list[list[Turn]]:
    """Build ``sessions`` sessions of ``turns`` turns each, changing domain every ``shift_every`` turns.

    Consecutive segments never repeat a domain; within a session no prompt is used twice.
    """
    rng = random.Random(seed)
    doms = [d for d in (domains or sorted(prompts)) if prompts.get(d)]
    if len(doms) < 2:
        raise ValueError("a multi-domain workload needs prompts from at least two domains")
    pools = {d: list(prompts[d]) for d in doms}
    for d in doms:
        rng.shuffle(pools[d])
    cursor = dict.fromkeys(doms, 0)
    out: list[list[Turn]] = []
    for _ in range(sessions):
        session: list[Turn] = []
        current: str | None = None
        for t in range(turns):
            if t % shift_every == 0:
                current = rng.choice([d for d in doms if d != current])
            assert current is not None
            pool = pools[current]
            prompt = pool[cursor[current] % len(pool)]
            cursor[current] += 1
            session.append(style.turn(prompt, max_new_tokens, current))
        out.append(session)
    return out
