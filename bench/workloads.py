"""The evaluation workload: multi-turn robot dialogues that drift between domains.

A session is what one robot's generation node serves over a stretch of time: it starts with a
robot command (the *home* domain; for a catalogue without a robot domain, the first domain of
its prompts file, see :func:`home_domain`), then the topic moves - a bit of code, a
calculation, a licence question, a quotation, back to commands - in segments of
``shift_every`` turns. Sessions cycle through several shift rates (a topic shift every turn,
every second turn, ...), because how often the topic moves is what decides whether keeping
the right drafts resident pays off. Every turn asks for a long generation.

Each topic segment is one multi-turn *conversation* (the target keeps its context from turn to
turn); a topic shift starts a new conversation, while the runtime - drafts in memory, policy,
predictor - carries on across the whole session. Why not one conversation for the whole
session: measured on the zoo, the small target keeps writing in the style of whatever the
conversation opened with (after two robot turns it answers a licence prompt with more robot
dialogue), so only 6 of 24 nominal topic shifts of the full workload changed which draft is
best, against 23 of 24 with a conversation per topic. ``carry_context=True`` (``--carry-context``)
builds the single-conversation variant anyway.

Deterministic: the same prompts file, seed and sizes give the same sessions, byte for byte,
for every policy and every run. Prompts come from the evaluation split only (see
:mod:`bench.split`): held-out prompts whose text the predictor was trained on are dropped,
and the separate calibration session (used to set the emulated bandwidth and the simulator's
overheads) takes prompts that no evaluation session uses.
"""

from __future__ import annotations

import random
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

from memspec_ros.runtime.traces import Turn
from memspec_ros.runtime.workload import RAW, ChatStyle

HOME_DOMAIN = "robot"
"""Every session opens with a robot command: it is a robot's dialogue."""


def home_domain(prompts: Mapping[str, Sequence[str]], pools: Mapping[str, Sequence[str]],
                requested: str | None = None) -> str:
    """The domain every session opens with.

    ``requested`` (``--home-domain``) if given; else ``robot`` when there are robot prompts (the
    bundled zoo's workload, unchanged); else the first domain of the prompts file that has
    usable prompts, so a catalogue without a robot domain opens each session the way its own
    prompts file lists its domains (``memspec_build`` writes them in the order the corpora were
    given, so put the robot's main task first).
    """
    if requested is not None:
        if requested not in pools:
            raise ValueError(f"home domain {requested!r} has no evaluation prompts; the prompts have "
                             f"{sorted(pools)}")
        return requested
    if HOME_DOMAIN in pools:
        return HOME_DOMAIN
    return next(d for d in prompts if d in pools)


@dataclass(frozen=True)
class ScriptedDialogue:
    """One scripted dialogue of the workload: its turns, in order, and how often its topic shifts.

    Named apart from the other "sessions" of the project (the engine's ``DecodeState``, the
    runtime's ``Conversation``, the node's ``DialogueStore``; see
    :mod:`memspec_ros.runtime.conversation`). The results JSON, the ``--sessions`` flag and the
    names ``session-<i>`` keep the word, so earlier results stay comparable.
    """

    name: str
    shift_every: int
    turns: tuple[Turn, ...]
    carry_context: bool = False
    """One conversation for the whole session instead of one per topic segment."""

    @property
    def domains(self) -> list[str | None]:
        """Domain of every turn."""
        return [t.domain for t in self.turns]

    @property
    def topic_shifts(self) -> list[int]:
        """Indices of the turns whose domain differs from the previous turn's."""
        return [i for i in range(1, len(self.turns)) if self.turns[i].domain != self.turns[i - 1].domain]

    @property
    def conversations(self) -> list[tuple[Turn, ...]]:
        """The turns grouped into conversations: one per topic segment (see the module docstring)."""
        if self.carry_context:
            return [self.turns] if self.turns else []
        out: list[list[Turn]] = []
        for t in self.turns:
            if out and out[-1][-1].domain == t.domain:
                out[-1].append(t)
            else:
                out.append([t])
        return [tuple(c) for c in out]

    def prefix(self, n: int) -> ScriptedDialogue:
        """The first ``n`` turns (a shorter generation of the same session)."""
        return ScriptedDialogue(f"{self.name}[:{n}]", self.shift_every, self.turns[:n], self.carry_context)


@dataclass(frozen=True)
class Workload:
    """Evaluation sessions, the calibration session, and how the prompts were chosen."""

    sessions: tuple[ScriptedDialogue, ...]
    calibration: ScriptedDialogue
    excluded_prompts: int
    """Held-out prompts dropped because the predictor was trained on the same text."""
    available_prompts: dict[str, int]
    """Evaluation prompts per domain after exclusions and de-duplication."""
    home_domain: str = HOME_DOMAIN
    """The domain every session opens with."""

    @property
    def prompts(self) -> list[str]:
        """Every prompt the evaluation sessions use (calibration excluded)."""
        return [t.prompt for s in self.sessions for t in s.turns]

    def describe(self) -> dict[str, object]:
        """JSON-friendly summary for the results file."""
        return {"sessions": [{"name": s.name, "shift_every": s.shift_every, "domains": s.domains,
                              "topic_shifts": len(s.topic_shifts), "conversations": len(s.conversations)}
                             for s in self.sessions],
                "carry_context": any(s.carry_context for s in self.sessions),
                "calibration": {"name": self.calibration.name, "domains": self.calibration.domains},
                "home_domain": self.home_domain,
                "excluded_prompts": self.excluded_prompts, "available_prompts": self.available_prompts,
                "max_new_tokens": sorted({t.max_new_tokens for s in self.sessions for t in s.turns})}


def evaluation_pools(prompts: Mapping[str, Sequence[str]], exclude: Container[str], seed: int
                     ) -> tuple[dict[str, list[str]], int]:
    """Per-domain prompt pools: de-duplicated, minus ``exclude``, in a seeded order.

    Returns the pools and how many distinct prompts were excluded.
    """
    rng = random.Random(seed)
    pools: dict[str, list[str]] = {}
    excluded: set[str] = set()
    for domain in sorted(prompts):
        unique = list(dict.fromkeys(prompts[domain]))
        kept = [p for p in unique if p not in exclude]
        excluded.update(p for p in unique if p in exclude)
        rng.shuffle(kept)
        if kept:
            pools[domain] = kept
    return pools, len(excluded)


def build_workload(prompts: Mapping[str, Sequence[str]], *, exclude: Container[str] = (), sessions: int,
                   turns: int, max_new_tokens: int, shift_rates: Sequence[int] = (1, 2, 3),
                   calibration_turns: int = 3, seed: int = 0, carry_context: bool = False,
                   home: str | None = None, style: ChatStyle = RAW) -> Workload:
    """Build the evaluation sessions and a calibration session from disjoint prompts.

    ``prompts`` maps domain -> held-out prompts; ``exclude`` holds prompt texts that must never
    be used (the predictor's training prompts). Session ``i`` shifts topic every
    ``shift_rates[i % len(shift_rates)]`` turns; the first segment is the home domain (``home``,
    or :func:`home_domain`'s choice: robot where there is one), each later segment a different
    domain than the one before, drawn with the seed. Prompts are used without replacement
    across the whole workload while a domain has unused ones, and never twice in one session.
    ``carry_context`` keeps one conversation per session. ``style`` makes every turn a chat turn
    (a user message) when the prompts are chat prompts.
    """
    if sessions < 1 or turns < 1:
        raise ValueError("a workload needs at least one session of one turn")
    if any(r < 1 for r in shift_rates):
        raise ValueError("shift rates are turns per topic segment, >= 1")
    pools, n_excluded = evaluation_pools(prompts, exclude, seed)
    domains = sorted(pools)
    if len(domains) < 2:
        raise ValueError("a multi-domain workload needs prompts from at least two domains")
    home = home_domain(prompts, pools, home)
    rng = random.Random(seed + 1)
    # Calibration prompts first, one per domain in turn, taken off the pools for good.
    calib: list[Turn] = []
    for i in range(calibration_turns):
        d = domains[i % len(domains)]
        if len(pools[d]) < 2:
            raise ValueError(f"domain {d!r} has too few prompts to spare one for calibration")
        calib.append(style.turn(pools[d].pop(), max_new_tokens, d))
    cursor = dict.fromkeys(domains, 0)
    out: list[ScriptedDialogue] = []
    for s in range(sessions):
        shift = shift_rates[s % len(shift_rates)]
        used: set[str] = set()
        session: list[Turn] = []
        current: str | None = None
        for t in range(turns):
            if t % shift == 0:
                current = home if t == 0 else rng.choice([d for d in domains if d != current])
            assert current is not None
            pool = pools[current]
            for _ in range(len(pool)):
                prompt = pool[cursor[current] % len(pool)]
                cursor[current] += 1
                if prompt not in used:
                    break
            else:
                raise ValueError(f"domain {current!r} has fewer than {turns} distinct prompts")
            used.add(prompt)
            session.append(style.turn(prompt, max_new_tokens, current))
        out.append(ScriptedDialogue(f"session-{s}", shift, tuple(session), carry_context))
    return Workload(sessions=tuple(out), calibration=ScriptedDialogue("calibration", 1, tuple(calib), carry_context),
                    excluded_prompts=n_excluded, available_prompts={d: len(p) for d, p in pools.items()},
                    home_domain=home)
