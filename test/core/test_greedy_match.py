"""The greedy acceptance rule and the knob bounds, defined once (milliseconds; no models)."""

from __future__ import annotations

import pytest

from memspec_ros.core.greedy_match import accepted_prefix, greedy_rounds, leading_matches, proposal_length
from memspec_ros.knobs import CHECK_INTERVAL, LOAD_TIMEOUT_S, K


def test_leading_matches_stops_at_the_first_mismatch() -> None:
    assert leading_matches([True, True, False, True]) == 2
    assert leading_matches([]) == 0
    assert leading_matches([False, True]) == 0
    assert accepted_prefix([5, 6, 7], [5, 6, 8, 9]) == 2
    assert accepted_prefix([5, 6], [5, 6, 8]) == 2, "a full accept; the reference has the bonus token"


def test_proposal_length_leaves_room_for_the_targets_token() -> None:
    assert proposal_length(4, 10) == 4
    assert proposal_length(4, 3) == 2
    assert proposal_length(4, 1) == 0
    assert proposal_length(4, 0) == 0


def test_rounds_over_a_match_vector() -> None:
    match = [True, True, False, True, True, True, True, False]
    # t=0: p=4, a=2 -> t=3; t=3: p=4, a=4 -> t=8: done.
    assert greedy_rounds(match, 4) == (6, 8, 2)
    # Under a turn limit of 8 tokens the second round may propose only 8 - 3 - 1 = 4.
    assert greedy_rounds(match, 4, limit=8) == (6, 8, 2)
    # A limit of 6: the second round proposes 2 and accepts them, the third none can.
    assert greedy_rounds(match, 4, limit=6) == (4, 6, 2)
    assert greedy_rounds(match, 4, start=3, end=4) == (4, 4, 1)


@pytest.mark.parametrize("bad", [0, 17, -1, 2.0, True, None, "4"])
def test_k_bound_is_one_message_everywhere(bad) -> None:
    with pytest.raises(ValueError, match=r"k must be an int in \[1, 16\]"):
        K.check(bad)


def test_float_and_int_bounds() -> None:
    assert K.problem(16) is None and CHECK_INTERVAL.problem(64) is None
    assert "check_interval" in CHECK_INTERVAL.problem(65)
    assert LOAD_TIMEOUT_S.problem(0.5) is None
    assert "load_timeout_s must be a number in [0.1, 3600]" in LOAD_TIMEOUT_S.problem(float("nan"))
