"""The transformers peer's round accounting under its two schedules (milliseconds; no models)."""

from __future__ import annotations

import numpy as np

from bench.hf_assisted import single_draft_rounds
from bench.trace_cache import DialogueTraces
from memspec_ros.runtime import CostModel
from memspec_ros.runtime.traces import DialogueTrace, TurnTrace


def _session(match: list[bool]) -> DialogueTraces:
    n = len(match)
    turn = TurnTrace(prompt="p", domain=None, max_new_tokens=n, prompt_ids=[1], output_ids=list(range(n)),
                     finish_reason="length", match={"d": np.array(match)})
    return DialogueTraces("s", [DialogueTrace("c", [turn])])


def _cost(k_max: int = 64) -> CostModel:
    return CostModel(verify_s=dict.fromkeys(range(k_max + 1), 0.01), draft_step_s={"d": 0.001},
                     draft_feed_s={"d": (0.001, 0.0)}, prefill_s=(0.0, 0.0), load_s={"d": 0.0})


def test_constant_schedule_proposes_k_every_round() -> None:
    rounds = single_draft_rounds(_session([True] * 40), "d", _cost(), 4)
    assert rounds.rounds == 8 and rounds.proposed == 32 and rounds.accepted == 32  # 5 tokens a round


def test_heuristic_schedule_grows_on_full_acceptance_and_shrinks_on_a_miss() -> None:
    # Fully accepted rounds: 4, 6, 8 proposals (+2 each) emit 5 + 7 + 9 = 21 tokens.
    grown = single_draft_rounds(_session([True] * 21), "d", _cost(), 4, "heuristic")
    assert (grown.rounds, grown.proposed, grown.accepted) == (3, 18, 18)
    # Nothing ever accepted: 4, 3, 2, 1, 1 proposals (-1 each, at least 1), one token a round.
    shrunk = single_draft_rounds(_session([False] * 5), "d", _cost(), 4, "heuristic")
    assert (shrunk.rounds, shrunk.proposed, shrunk.accepted) == (5, 4 + 3 + 2 + 1 + 0, 0)
