"""Exact greedy acceptance traces of dialogue sessions.

The identity (``shared/zoo-feasibility.md``): with greedy verification a draft's proposals equal
the target's tokens up to the first mismatch. So one greedy run of the target over a session
and one teacher-forced pass of each draft over the resulting tokens give, for every generated
position ``t`` and draft ``d``, ``match_d[t] = argmax draft_d(prefix_t) == target_token[t]``. A
round that starts at ``t`` with ``d`` proposing ``p`` tokens then accepts the run of ones in
``match_d`` from ``t``, capped at ``p``, and emits one more token (the target's own). That makes a
trace-driven simulation exact in tokens for *any* policy and switching pattern.

A trace also keeps the target's final hidden state for every generated token (the predictor's
feature) so predictor training and simulation see what a real run would.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from memspec_ros.core.greedy_match import leading_matches, proposal_length
from memspec_ros.core.proposer import DraftProposer


@dataclass(frozen=True)
class Turn:
    """One dialogue turn of a workload: a prompt, a token limit and (for reports) its domain.

    A ``chat`` turn's ``prompt`` is the user's message: the conversation's messages, rendered
    with the target's chat template (``system_prompt`` first), are what the target sees, exactly
    as the node renders a chat goal (:func:`memspec_ros.runtime.turns.fit_user_message`).
    """

    prompt: str
    max_new_tokens: int
    domain: str | None = None
    chat: bool = False
    system_prompt: str = ""


@dataclass
class TurnTrace:
    """What the target did in one turn, and what each draft would have matched."""

    prompt: str
    domain: str | None
    max_new_tokens: int
    prompt_ids: list[int]
    """Tokens this turn's prompt added to the session (as the engine tokenised them)."""
    output_ids: list[int]
    """The target's greedy tokens (end-of-sequence included if produced)."""
    finish_reason: str
    match: dict[str, np.ndarray]
    """Per draft: ``bool[len(output_ids)]``."""
    hidden: np.ndarray | None = None
    """``float16[len(output_ids), H]``: the hidden state that produced each output token."""
    target_self_match: float = 1.0
    """Fraction of output tokens the teacher-forced target pass reproduces (1.0 = numerically exact)."""
    rewind: int = 0
    """Tokens dropped from the end of the conversation's context before ``prompt_ids`` were added: a
    chat turn whose rendering of the history differs from the tokens the target saw (an answer
    that re-tokenises differently) keeps the common prefix and re-encodes the rest, as the node
    does. The context of this turn is the previous context minus ``rewind`` tokens, plus
    ``prompt_ids``."""

    def run_length(self, draft: str, pos: int, cap: int) -> int:
        """Leading ones of ``match[draft]`` from ``pos``, at most ``cap``."""
        return leading_matches(self.match[draft][pos:pos + cap])

    def round_at(self, draft: str | None, pos: int, k: int) -> tuple[int, int, int]:
        """``(proposed, accepted, emitted)`` of a round at ``pos`` - the engine's exact rules.

        The engine proposes ``min(k, remaining - 1)`` tokens (more could not be emitted), emits
        accepted + 1, and stops at end-of-sequence (the trace's last token then).
        """
        p = 0 if draft is None else proposal_length(k, self.max_new_tokens - pos)
        a = self.run_length(draft, pos, p) if draft is not None else 0
        return p, a, min(a + 1, len(self.output_ids) - pos)


@dataclass
class DialogueTrace:
    """All turns of one session, in order."""

    name: str
    turns: list[TurnTrace] = field(default_factory=list)

    @property
    def drafts(self) -> list[str]:
        """Drafts the trace covers."""
        return sorted(self.turns[0].match) if self.turns else []

    @property
    def generated_tokens(self) -> int:
        """Tokens the target generated over the whole session."""
        return sum(len(t.output_ids) for t in self.turns)

    def accepted(self, draft: str, turn: int, pos: int, k_round: int) -> int:
        """Tokens ``draft`` gets accepted in a round at ``(turn, pos)`` proposing ``k_round``."""
        return self.turns[turn].run_length(draft, pos, k_round)

    def turn_contexts(self) -> Iterator[tuple[TurnTrace, list[int]]]:
        """Each turn with the whole context it was decoded from (the conversation so far, minus
        what the turn rewound, plus its prompt): what a stateless client sends for it."""
        context: list[int] = []
        for turn in self.turns:
            context = [*context[:len(context) - turn.rewind], *turn.prompt_ids]
            yield turn, context
            context = [*context, *turn.output_ids]

    def save(self, path: Path | str) -> None:
        """Write as ``.npz`` (arrays plus a JSON header; loadable without pickle)."""
        arrays: dict[str, np.ndarray] = {}
        header = {"name": self.name, "turns": []}
        for i, t in enumerate(self.turns):
            header["turns"].append({"prompt": t.prompt, "domain": t.domain, "max_new_tokens": t.max_new_tokens,
                                    "finish_reason": t.finish_reason, "drafts": sorted(t.match),
                                    "target_self_match": t.target_self_match, "rewind": t.rewind})
            arrays[f"t{i}_prompt_ids"] = np.asarray(t.prompt_ids, dtype=np.int32)
            arrays[f"t{i}_output_ids"] = np.asarray(t.output_ids, dtype=np.int32)
            for d, m in t.match.items():
                arrays[f"t{i}_match_{d}"] = np.asarray(m, dtype=bool)
            if t.hidden is not None:
                arrays[f"t{i}_hidden"] = t.hidden.astype(np.float16)
        arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path: Path | str) -> DialogueTrace:
        """Read a file written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(bytes(z["header"]).decode())
            turns = []
            for i, h in enumerate(header["turns"]):
                hid = z[f"t{i}_hidden"] if f"t{i}_hidden" in z.files else None
                turns.append(TurnTrace(
                    prompt=h["prompt"], domain=h["domain"], max_new_tokens=h["max_new_tokens"],
                    prompt_ids=z[f"t{i}_prompt_ids"].tolist(), output_ids=z[f"t{i}_output_ids"].tolist(),
                    finish_reason=h["finish_reason"], match={d: z[f"t{i}_match_{d}"] for d in h["drafts"]},
                    hidden=hid, target_self_match=h.get("target_self_match", 1.0), rewind=h.get("rewind", 0)))
        return cls(name=header["name"], turns=turns)


@torch.inference_mode()
def _teacher_forced(model: torch.nn.Module, ids: Sequence[int], chunk: int = 512,
                    proposable: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Final hidden states and argmax predictions of ``model`` at every position of ``ids``
    (the argmax over the first ``proposable`` logits when given)."""
    device = next(model.parameters()).device
    x = torch.tensor([list(ids)], dtype=torch.long, device=device)
    out = model.base_model(input_ids=x).last_hidden_state[0]
    head = model.get_output_embeddings()
    argmax = torch.cat([head(out[i: i + chunk])[:, :proposable].argmax(-1) for i in range(0, out.shape[0], chunk)])
    return out.float(), argmax


def draft_argmax(draft: torch.nn.Module | DraftProposer, ids: Sequence[int]) -> torch.Tensor:
    """Target ids a draft predicts at every position of ``ids`` (a proposer's token map applied)."""
    token_map = draft.token_map if isinstance(draft, DraftProposer) else None
    model = draft.model if isinstance(draft, DraftProposer) else draft
    if token_map is None:
        return _teacher_forced(model, ids)[1]
    argmax = _teacher_forced(model, token_map.to_draft(ids), proposable=token_map.other)[1]
    return token_map.draft_to_target.to(argmax.device)[argmax]


def record_dialogue(
    engine,
    drafts: Mapping[str, torch.nn.Module | DraftProposer],
    turns: Sequence[Turn],
    name: str = "session",
    *,
    helper: Callable[[Turn], object | None] | None = None,
    k: int = 4,
    keep_hidden: bool = True,
) -> DialogueTrace:
    """Run the target greedily over ``turns`` (one session) and build the exact trace.

    ``engine`` is a :class:`~memspec_ros.core.engine.SpeculativeEngine`; ``drafts`` maps names to
    draft models, or to proposers (whose token maps then apply: a subset draft needs its own).
    ``helper(turn)`` may return a proposer to speed the greedy run up - the output is the
    target's greedy output either way (that is the engine's guarantee).
    """
    from memspec_ros.runtime.conversation import Conversation
    from memspec_ros.runtime.turns import answered, fit_user_message

    session = None
    conversation = Conversation()
    bounds: list[tuple[int, int, int]] = []  # (prompt start, output start, output end) in the turn's context
    contexts: list[list[int]] = []  # each turn's whole context: one list unless a chat turn rewound
    rewinds: list[int] = []
    reasons: list[str] = []
    for turn in turns:
        before = len(session.token_ids) if session is not None else 0
        proposer = helper(turn) if helper is not None else None
        prompt: str | list[int] = turn.prompt
        if turn.chat:
            conversation.state = session
            fitted = fit_user_message(engine, conversation, turn)  # may rewind (the node would too)
            if fitted.kept_tokens is not None:
                raise ValueError(f"turn {len(bounds)} of {name} does not fit the context window: shorten the "
                                 "dialogue (a trace cannot follow a slide)")
            session, prompt = conversation.state, fitted.prompt_ids
        start = len(session.token_ids) if session is not None else 0
        rewinds.append(before - start)
        session = engine.run_turn(session, prompt, turn.max_new_tokens, proposer, k)
        if turn.chat:
            answered(conversation, fitted, session.text())
        bounds.append((start, session.turn_start, len(session.token_ids)))
        contexts.append(list(session.token_ids))
        reasons.append(session.finish_reason or "length")
    assert session is not None
    width = int(engine.target.config.get_text_config().vocab_size)
    narrow = [n for n, d in drafts.items() if not isinstance(d, DraftProposer) and d.config.vocab_size != width]
    if narrow:  # a subset draft's raw model would compare its own ids with the target's
        raise ValueError(f"drafts {narrow} have fewer logits than the target: pass their proposers "
                         "(DraftProposer with the draft's token map), not their models")
    # One teacher-forced pass over the final context covers every turn, unless a turn rewound the
    # context: then each turn is scored on its own context (what the target really saw).
    passes = [contexts[-1]] * len(turns) if not any(rewinds) else contexts
    scored: dict[int, tuple] = {}
    trace = DialogueTrace(name=name)
    for i, (turn, (p0, o0, o1), reason) in enumerate(zip(turns, bounds, reasons, strict=True)):
        ids = passes[i]
        if id(ids) not in scored:
            target_hidden, target_argmax = _teacher_forced(engine.target, ids)
            scored[id(ids)] = (target_hidden, target_argmax, {n: draft_argmax(d, ids) for n, d in drafts.items()})
        target_hidden, target_argmax, predictions = scored[id(ids)]
        outs = ids[o0:o1]
        tgt = torch.tensor(outs)
        match = {n: (pred[o0 - 1: o1 - 1].cpu() == tgt).numpy() for n, pred in predictions.items()}
        hidden = target_hidden[o0 - 1: o1 - 1].cpu().numpy().astype(np.float16) if keep_hidden else None
        trace.turns.append(TurnTrace(prompt=turn.prompt, domain=turn.domain, max_new_tokens=turn.max_new_tokens,
                                     prompt_ids=ids[p0:o0], output_ids=outs, finish_reason=reason,
                                     match=match, hidden=hidden,
                                     target_self_match=float((target_argmax[o0 - 1: o1 - 1].cpu() == tgt)
                                                             .float().mean()) if outs else 1.0,
                                     rewind=rewinds[i]))
    return trace
