"""Choosing torch's thread count by timing speculative rounds (tiny models; a second or so)."""

from __future__ import annotations

import torch

from memspec_ros.core.thread_tuning import candidate_thread_counts, fastest_thread_count


def test_candidates_are_powers_of_two_up_to_the_cores() -> None:
    assert candidate_thread_counts(1) == [1]
    assert candidate_thread_counts(2) == [1, 2]
    assert candidate_thread_counts(6) == [1, 2, 4, 6]
    assert candidate_thread_counts(8) == [1, 2, 4, 8]


def test_the_choice_is_measured_and_applied(tiny_zoo) -> None:
    before = torch.get_num_threads()
    try:
        prompt = tiny_zoo.engine.encode("robot move to the kitchen")
        choice = fastest_thread_count(tiny_zoo.engine, tiny_zoo.fresh_draft("noisy"), prompt, rounds=4,
                                      candidates=[1, 2])
        assert set(choice.round_s) == {1, 2} and all(s > 0 for s in choice.round_s.values())
        assert torch.get_num_threads() == choice.threads
        if choice.threads == 2:  # more threads are only chosen when clearly faster
            assert choice.round_s[2] < 0.85 * choice.round_s[1]
        assert "median speculative round: 1 -> " in choice.describe()
        alone = fastest_thread_count(tiny_zoo.engine, None, prompt, rounds=3, candidates=[1])
        assert alone.threads == 1
    finally:
        torch.set_num_threads(before)
