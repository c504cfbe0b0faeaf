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
from pathlib import Path

from .traces import Turn


def load_prompts(path: Path | str) -> dict[str, list[str]]:
    """Read a ``prompts.jsonl`` of ``{"domain", "prompt"}`` rows into ``{domain: [prompt, ...]}``."""
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                out.setdefault(row["domain"], []).append(row["prompt"])
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
            session.append(Turn(prompt=prompt, max_new_tokens=max_new_tokens, domain=current))
        out.append(session)
    return out
