"""End-to-end runtime behaviour on real (tiny) models: lossless output, stalls, faults, threads."""

from __future__ import annotations

import threading

import pytest

from memspec_ros.runtime import (
    POLICY_NAMES,
    Budget,
    DraftRuntime,
    DraftState,
    RuntimeConfig,
    StorageModel,
    make_policy,
)
from memspec_ros.runtime.residency import OCCUPYING_STATES

from .rt_tiny_zoo import DIALOGUE


def _storage_for_rounds(world, rounds: float, round_s: float = 0.004) -> StorageModel:
    """Emulated storage on which the mean draft takes ``rounds`` rounds to load."""
    mean = sum(s.stored_bytes for s in world.catalogue) / len(world.catalogue)
    return StorageModel(bandwidth_bytes_per_s=mean / (rounds * round_s))


def _runtime(world, policy: str, catalogue=None, **cfg) -> DraftRuntime:
    cat = catalogue or world.catalogue
    pol = make_policy(policy, predictor=world.predictor.restricted_to(cat.names), oracle=world.trace)
    cfg.setdefault("storage", _storage_for_rounds(world, 3.0))
    rt = DraftRuntime(world.engine, cat, Budget.drafts(2), pol, RuntimeConfig(**cfg))
    rt.warm_up()
    return rt


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_greedy_output_equals_target_only(world, reference_outputs, policy) -> None:
    with _runtime(world, policy) as rt:
        reports = rt.run_dialogue(DIALOGUE)
        assert [r.output_ids for r in reports] == reference_outputs
        stats = rt.statistics()
        assert stats.tokens == sum(len(o) for o in reference_outputs)
        assert rt.pool.peak_bytes <= rt.pool.budget_bytes or policy == "oracle"
        # drafts were accepted somewhere; ucb-resident only drafts with what the loader has finished, and
        # under a busy parallel run no load may finish within this short dialogue (seen once: 60 < 60);
        # memspec-manage-only's untried drafts count at a prior that, under a busy parallel run, does not
        # repay the measured load cost within these short turns, so it may never load one (load_value.py)
        if policy not in ("static", "ucb-resident", "memspec-manage-only"):
            assert stats.rounds < stats.tokens


def test_memspec_never_stalls_and_prefetches(world) -> None:
    with _runtime(world, "memspec") as rt:
        before = set(rt.pool.resident())
        reports = rt.run_dialogue(DIALOGUE)
        assert all(r.stall_s == 0.0 for r in reports)
        assert rt.statistics().stall_s == 0.0
        assert sum(r.loads for r in reports) >= 1  # something was prefetched while decoding
        used = {d for r in reports for d in r.drafts_used}
        assert used - before, "a prefetched draft was swapped in"
        # while the prefetch was in flight, decoding went on with a resident draft
        loading_rounds = [ev for r in reports for ev in r.timeline if ev.loading]
        assert loading_rounds and all(ev.stall_s == 0.0 for ev in loading_rounds)


def test_stalling_baseline_measures_its_stalls(world) -> None:
    with _runtime(world, "reactive") as rt:
        reports = rt.run_dialogue(DIALOGUE)
        assert sum(r.stall_s for r in reports) > 0.0


@pytest.mark.parametrize("policy", ["reactive", "memspec"])
def test_failed_load_during_generation_keeps_decoding(world, reference_outputs, tmp_path, policy) -> None:
    cat, dirs = world.fresh_catalogue(tmp_path)
    # The draft every policy goes for (the exact copy) turns out to be corrupt on storage.
    weights = dirs["draft-copy"] / "model.safetensors"
    weights.write_bytes(b"\x00" * weights.stat().st_size)
    failures = []
    pol = make_policy(policy, predictor=world.predictor.restricted_to(cat.names))
    rt = DraftRuntime(world.engine, cat, Budget.drafts(2), pol,
                      RuntimeConfig(storage=_storage_for_rounds(world, 2.0)), on_load_failure=failures.append)
    with rt:
        # warm up without the corrupt draft, so that its load is first requested while generating
        rt.warm_up([n for n in pol.initial_working_set() if n != "draft-copy"])
        assert rt.statistics().load_failures == 0
        reports = rt.run_dialogue(DIALOGUE)
        assert [r.output_ids for r in reports] == reference_outputs
        assert failures and failures[0].name == "draft-copy"
        # counted in the runtime's totals: a prefetch may fail between two turns, outside every turn's report
        assert rt.statistics().load_failures >= 1
        # one consistent snapshot: a prefetch of another draft may still be in flight (LOADING holds its
        # reservation), but the failed load gave its reservation back
        snap = rt.pool.snapshot()
        assert snap.state("draft-copy") == DraftState.ON_STORAGE
        assert snap.used_bytes == sum(rt.pool.spec(n).size_bytes for n in snap.names_in(*OCCUPYING_STATES))
        assert "draft-copy" in rt.view().unusable


def test_external_scheduling_from_another_thread(world, reference_outputs) -> None:
    """The node's pattern: the decode loop only signals; a separate thread runs tick()."""
    rt = _runtime(world, "memspec", scheduling="external")
    stop = threading.Event()
    due = threading.Event()
    rt.on_check_due = due.set  # the node triggers a guard condition here
    ticks = []

    def timer() -> None:
        while not stop.is_set():
            if due.wait(0.01):
                due.clear()
                ticks.append(rt.tick())

    thread = threading.Thread(target=timer)
    thread.start()
    try:
        reports = rt.run_dialogue(DIALOGUE)
    finally:
        stop.set()
        thread.join(5)
        rt.close()
    assert [r.output_ids for r in reports] == reference_outputs
    assert ticks and rt.scheduler.stats.ticks == len(ticks)
    assert all(r.stall_s == 0.0 for r in reports)


def test_cancel_stops_within_a_round_and_dialogue_continues(world) -> None:
    with _runtime(world, "memspec") as rt:
        conv = rt.new_conversation()
        rounds = []
        rep = rt.generate(DIALOGUE[0].prompt, 40, conversation=conv,
                          on_round=lambda s, sess: rounds.append(s), should_stop=lambda: len(rounds) >= 2)
        assert rep.finish_reason == "cancelled" and rep.rounds == 2
        nxt = rt.generate(DIALOGUE[1].prompt, 8, conversation=conv)
        assert nxt.tokens == 8 and conv.turns == 2


def test_hint_is_validated(world) -> None:
    with _runtime(world, "memspec") as rt:
        rt.set_hint("copy")
        assert rt.view().hint == "copy"
        with pytest.raises(ValueError, match="unknown domain"):
            rt.set_hint("astrology")
