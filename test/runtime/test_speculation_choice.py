"""``num_speculative_tokens: 0`` and ``check_interval: 0``: the choice at configure, on real (tiny) models."""

from __future__ import annotations

import json

import pytest

from memspec_ros.runtime import Budget, make_materializer
from memspec_ros.runtime.policies import make_policy
from memspec_ros.runtime.speculation_choice import (
    FALLBACK_K,
    INTERVALS,
    MAX_K,
    choose_speculation,
    modelled_rates,
    pick_ceiling,
    pick_interval,
    pick_k,
    read_rounds_by_k,
)


def _write_report(root, rounds_by_draft: dict[str, dict[int, list[int]]], domains: dict[str, str]) -> None:
    (root / "reports").mkdir(parents=True, exist_ok=True)
    report = {"drafts": {n: {"domain": d} for n, d in domains.items()},
              "own_rounds_by_k": {n: {str(k): v for k, v in by_k.items()} for n, by_k in rounds_by_draft.items()}}
    (root / "reports" / "evaluation.json").write_text(json.dumps(report))


def _runs(accept_run: int, rounds: int) -> dict[int, list[int]]:
    """Rounds of each k on text where every proposal run accepts exactly ``accept_run`` tokens."""
    return {k: [min(k, accept_run) * rounds, k * rounds, rounds] for k in range(1, MAX_K + 1)}


def test_long_acceptance_runs_and_flat_verification_choose_a_long_ceiling() -> None:
    verify = {n: 40.0 + 0.5 * n for n in range(1, MAX_K + 2)}  # nearly flat, as a CPU target's is
    long_runs = modelled_rates({k: tuple(v) for k, v in _runs(6, 100).items()}, verify, step_ms=2.0)
    assert pick_k(long_runs) == 6  # past 6 a step buys nothing
    short_runs = modelled_rates({k: tuple(v) for k, v in _runs(1, 100).items()}, verify, step_ms=2.0)
    assert pick_k(short_runs) == 1
    costly = modelled_rates({k: tuple(v) for k, v in _runs(6, 100).items()},
                            {n: 10.0 * n for n in range(1, MAX_K + 2)}, step_ms=9.0)
    assert pick_k(costly) < 6  # a verification that grows with its length limits the ceiling


def test_the_ceiling_lets_the_draft_that_gains_most_from_long_rounds_reach_its_best() -> None:
    """memspec shortens rounds itself where acceptance is low: the ceiling is the largest best k."""
    verify = {n: 40.0 + 0.5 * n for n in range(1, MAX_K + 2)}
    rounds = {"weak": {k: tuple(v) for k, v in _runs(1, 100).items()},
              "strong": {k: tuple(v) for k, v in _runs(6, 100).items()}}
    k, by_draft, rates = pick_ceiling(rounds, verify, 2.0)
    assert by_draft == {"weak": 1, "strong": 6} and k == 6
    assert rates == modelled_rates(rounds["strong"], verify, 2.0)


def test_near_ties_go_to_the_shorter_ceiling() -> None:
    assert pick_k({2: 100.0, 3: 101.0, 4: 101.5}) == 2
    assert pick_k({2: 90.0, 3: 101.0, 4: 101.5}) == 3


def test_the_interval_keeps_decisions_within_their_share_of_decoding() -> None:
    assert pick_interval(0.1, 50.0) == 4  # never below 4: a decision's switches cost more than its timing
    assert pick_interval(1.5, 50.0) == 4
    assert pick_interval(3.0, 50.0) == 8
    assert pick_interval(500.0, 50.0) == INTERVALS[-1]


def test_the_rounds_come_from_the_domain_drafts_of_the_catalogue(tmp_path) -> None:
    _write_report(tmp_path, {"a": _runs(2, 10), "b": _runs(4, 30), "gen": _runs(1, 50), "gone": _runs(8, 99)},
                  {"a": "code", "b": "chat", "gen": "general", "gone": "poetry"})
    rounds, why = read_rounds_by_k(tmp_path, ["a", "b", "gen"])
    assert why == "" and sorted(rounds) == ["a", "b"]  # not the general draft, nor one not served
    assert rounds["b"][4] == (4 * 30, 4 * 30, 30) and rounds["a"][1] == (10, 10, 10)
    only_general, _ = read_rounds_by_k(tmp_path, ["gen"])
    assert only_general["gen"][4] == (50, 200, 50)


@pytest.mark.parametrize(("content", "match"), [
    (None, "no .*evaluation.json: run memspec_build evaluate"),
    ("{not json", "unreadable"),
    (json.dumps({"drafts": {}}), "no rounds by k"),
    (json.dumps({"own_rounds_by_k": {"a": {"1": [1, 2]}}}), "malformed"),
    (json.dumps({"own_rounds_by_k": {"other": {}}}), "none of the catalogue's drafts"),
])
def test_a_missing_or_damaged_report_says_what_to_rerun(tmp_path, content, match) -> None:
    if content is not None:
        (tmp_path / "reports").mkdir()
        (tmp_path / "reports" / "evaluation.json").write_text(content)
    rounds, why = read_rounds_by_k(tmp_path, ["a"])
    assert rounds is None
    assert __import__("re").search(match, why), why


def _memspec(world):
    return lambda: make_policy("memspec", predictor=world.predictor, draft_names=world.catalogue.names)


def test_configure_prices_the_build_rounds_at_measured_times(world, tmp_path) -> None:
    """Real engine, drafts and loader: the chosen k is the best modelled one, the interval one of the
    candidates, every timing positive; the probing runtime is closed."""
    names = world.catalogue.names
    _write_report(tmp_path, {n: _runs(3, 20) for n in names}, {n: "d" + n for n in names})
    choice = choose_speculation(world.engine, world.catalogue, Budget.drafts(1), make_materializer(world.catalogue),
                                _memspec(world), tmp_path)
    assert choice.k_auto and choice.interval_auto and choice.k_reason == ""
    assert sorted(choice.k_rates) == list(range(1, MAX_K + 1)) and choice.k == pick_k(choice.k_rates)
    assert choice.k == max(choice.k_by_draft.values()) and set(choice.k_by_draft) == set(names)
    assert choice.draft_step_ms > 0 and all(v > 0 for v in choice.verify_ms.values())
    assert choice.tick_ms > 0 and choice.check_interval == pick_interval(choice.tick_ms, choice.round_ms)
    assert f"k auto: {choice.k} (the longest of the domain drafts' best fixed k: " in choice.describe()


def test_set_values_are_kept_and_a_missing_report_keeps_the_fallback(world, tmp_path) -> None:
    mat = make_materializer(world.catalogue)
    set_both = choose_speculation(world.engine, world.catalogue, Budget.drafts(1), mat, _memspec(world), tmp_path,
                                  k=3, check_interval=8)
    assert (set_both.k, set_both.check_interval) == (3, 8)
    assert set_both.describe() == "k=3, check_interval=8"
    no_report = choose_speculation(world.engine, world.catalogue, Budget.drafts(1), mat, _memspec(world), tmp_path,
                                   check_interval=8)
    assert no_report.k == FALLBACK_K and "run memspec_build evaluate" in no_report.describe()
    none_fits = choose_speculation(world.engine, world.catalogue, Budget.bytes(1), mat, _memspec(world), tmp_path)
    assert none_fits.k == FALLBACK_K and "no draft fits" in none_fits.describe()


def test_aprobe_draft_that_fails_to_load_keeps_the_defaults(world, tmp_path) -> None:
    """A damaged draft file (fault injected at the file): configure still resolves, with the reason."""
    from memspec_ros.runtime.speculation_choice import probe_draft

    cat, dirs = world.fresh_catalogue(tmp_path / "drafts")
    largest = probe_draft(cat, Budget.drafts(1)).name
    (dirs[largest] / "model.safetensors").write_bytes(b"\x00" * 64)
    choice = choose_speculation(world.engine, cat, Budget.drafts(1), make_materializer(cat), _memspec(world),
                                tmp_path)
    assert (choice.k, choice.check_interval) == (FALLBACK_K, 4)
    assert f"draft {largest} did not load for timing" in choice.describe()


def test_a_context_window_too_short_to_time_keeps_the_defaults(world, tmp_path) -> None:
    from memspec_ros.core.engine import SpeculativeEngine

    short = SpeculativeEngine(world.engine.target, world.engine.tokenizer, max_context=40)
    choice = choose_speculation(short, world.catalogue, Budget.drafts(1), make_materializer(world.catalogue),
                                _memspec(world), tmp_path)
    assert (choice.k, choice.check_interval) == (FALLBACK_K, 4) and "too short to time" in choice.describe()
