"""The external peers: transformers' assisted generation with the best single draft, and its
prompt-lookup decoding.

``model.generate(assistant_model=draft)`` is what a user of transformers gets out of the box.
It takes one assistant for the whole conversation, so it is given the draft that is best for
the workload *in hindsight* (highest simulated tokens/s over the sessions' exact traces, all
drafts resident) - a choice no online system could make, which favours the peer. Two schedules
run: ``hf-assisted`` matches our settings (``num_assistant_tokens = k``, constant) and
``hf-assisted-heuristic`` uses transformers' adaptive heuristic schedule starting from k
(+2 after a fully accepted round, -1 otherwise; transformers 5.x's own unset default is a
constant 20 tokens cut short by the assistant's confidence, not run here). Both: greedy, same
``max_new_tokens`` and end-of-sequence tokens, same thread count. ``generate`` keeps no cache
between calls, so each turn re-encodes the dialogue so far (measured: passing the previous
turn's cache back in together with an assistant gave wrong tokens in transformers 5.x, so it
is not used).

``hf-prompt-lookup`` is ``generate(prompt_lookup_num_tokens=k)``: n-gram proposals from the
context itself (no draft model), transformers' answer for repetitive text.

The assistant's settings come from ``bench/engine_bench.py``'s ``assistant_config`` (the engine
benchmark's HF comparison uses the same); the timed ``generate`` call is kept here because it is
the thing this peer measures.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import GenerationConfig

from memspec_ros.runtime import CostModel

from .engine_bench import assistant_config
from .measures import RunMeasure, with_check
from .output_check import OutputCheck, check_outputs
from .testbed import Testbed
from .trace_cache import DialogueTraces


@dataclass
class SingleDraftRounds:
    """Exact rounds of decoding a session with one draft (from its trace), and their modelled time."""

    tokens: int = 0
    rounds: int = 0
    proposed: int = 0
    accepted: int = 0
    seconds: float = 0.0


def single_draft_rounds(trace: DialogueTraces, draft: str, cost: CostModel, k: int,
                        schedule: str = "constant") -> SingleDraftRounds:
    """Round by round, the engine's rules: what ``draft`` alone gets accepted on ``trace``.

    With ``schedule="heuristic"`` the proposal length follows transformers' heuristic (start at
    ``k``; +2 after a fully accepted round, -1 otherwise, at least 1), carried across the turns
    of the session as transformers carries it across ``generate`` calls.
    """
    out = SingleDraftRounds()
    length = k
    for turn in trace.turns:
        pos = 0
        while pos < len(turn.output_ids):
            p, a, e = turn.round_at(draft, pos, length)
            out.seconds += cost.propose_s(draft, p, 1) + cost.verify(p)
            out.rounds += 1
            out.proposed += p
            out.accepted += a
            pos += e
            if schedule == "heuristic" and p:
                length = length + 2 if a == p else max(1, length - 1)
        out.tokens += len(turn.output_ids)
    return out


def best_single_draft(traces: Sequence[DialogueTraces], drafts: Sequence[str], cost: CostModel, k: int) -> str:
    """The draft with the highest modelled tokens/s over all sessions (hindsight choice)."""
    def rate(d: str) -> float:
        runs = [single_draft_rounds(tr, d, cost, k) for tr in traces]
        seconds = sum(r.seconds for r in runs)
        return sum(r.tokens for r in runs) / seconds if seconds else 0.0
    return max(drafts, key=rate)


def assisted_generate(testbed: Testbed, ids: list[int], max_new_tokens: int, assistant: torch.nn.Module | None = None,
                      **speculation: int) -> tuple[list[int], float]:
    """One greedy ``generate`` call with ``assistant_model`` (or ``speculation`` keywords such as
    ``prompt_lookup_num_tokens``): new tokens and wall seconds."""
    eos = sorted(testbed.engine.eos_token_ids)
    config = GenerationConfig(do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=eos, pad_token_id=eos[0],
                              **speculation)
    input_ids = torch.tensor([ids])
    start = time.perf_counter()
    with torch.inference_mode():
        out = testbed.engine.target.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                             generation_config=config, assistant_model=assistant)
    return out[0, len(ids):].tolist(), time.perf_counter() - start


def _over_conversations(testbed: Testbed, trace: DialogueTraces, generate) -> tuple[float, int, OutputCheck]:
    """``generate(context, max_new_tokens) -> (tokens, seconds)`` for every turn, each conversation's
    context rebuilt from the trace as a stateless client would send it; (seconds, tokens, the check
    of the outputs against the trace's)."""
    wall, outputs = 0.0, []
    for conv in trace.conversations:
        for turn, context in conv.turn_contexts():
            out, seconds = generate(context, turn.max_new_tokens)
            wall += seconds
            outputs.append(out)
    return wall, sum(map(len, outputs)), check_outputs(testbed.engine.target, trace, outputs)


def run_hf_assisted(testbed: Testbed, trace: DialogueTraces, draft: str, k: int, cost: CostModel,
                    schedule: str = "constant") -> RunMeasure:
    """Assisted generation over a session's turns; each conversation's context comes from the trace.

    ``generate`` does not report its rounds, so rounds and acceptance are the exact ones of
    that draft on the trace under the same schedule (the same greedy rules; transformers' default
    confidence threshold may end a proposal early, which this does not model); the time is measured.
    """
    assistant = testbed.assistant(draft)
    saved = assistant.generation_config
    assistant.generation_config = assistant_config(saved, k, schedule)
    try:
        wall, tokens, check = _over_conversations(
            testbed, trace, lambda ids, n: assisted_generate(testbed, ids, n, assistant))
    finally:
        assistant.generation_config = saved
    rounds = single_draft_rounds(trace, draft, cost, k, schedule)
    return with_check(RunMeasure(session=trace.name, tokens=tokens, wall_s=wall, rounds=rounds.rounds,
                                 proposed=rounds.proposed, accepted=rounds.accepted,
                                 peak_memory_bytes=testbed.catalogue.get(draft).size_bytes), check)


def run_hf_prompt_lookup(testbed: Testbed, trace: DialogueTraces, tokens: int) -> RunMeasure:
    """transformers' prompt-lookup decoding (``prompt_lookup_num_tokens``): n-gram proposals copied
    from the context, no draft model, verified by the target as usual (greedy: lossless). Rounds
    are not reported by ``generate``; the time and the output are measured."""
    wall, total, check = _over_conversations(
        testbed, trace, lambda ids, n: assisted_generate(testbed, ids, n, prompt_lookup_num_tokens=tokens))
    return with_check(RunMeasure(session=trace.name, tokens=total, wall_s=wall), check)


def warm_up_hf(testbed: Testbed, trace: DialogueTraces, draft: str, k: int) -> None:
    """One short untimed assisted call, so that lazy initialisation is not charged to the first session."""
    assistant = testbed.assistant(draft)
    saved = assistant.generation_config
    assistant.generation_config = assistant_config(saved, k)
    try:
        assisted_generate(testbed, trace.turns[0].prompt_ids, 8, assistant)
    finally:
        assistant.generation_config = saved


def reencoding(trace: DialogueTraces, cost: CostModel) -> tuple[int, float]:
    """Dialogue-history tokens ``generate`` encodes again over a session, and their modelled seconds.

    Our engine keeps the target's cache across turns and prefills only each new prompt;
    ``generate`` prefills the whole dialogue every turn. The difference is this history.
    """
    tokens, seconds = 0, 0.0
    for conv in trace.conversations:
        context = 0
        for turn in conv.turns:
            context -= turn.rewind
            tokens += context
            seconds += cost.prefill(context + len(turn.prompt_ids)) - cost.prefill(len(turn.prompt_ids))
            context += len(turn.prompt_ids) + len(turn.output_ids)
    return tokens, seconds
