"""A turn that fails half-way leaves its dialogue usable; waits in a round honour cancel."""

from __future__ import annotations

import time

import pytest

from memspec_ros.runtime import Budget, DraftRuntime, RuntimeConfig, StorageModel, make_policy

from .rt_tiny_zoo import DIALOGUE


class _Fault(RuntimeError):
    """Injected at the on_round boundary (the caller's callback) to break a turn mid-way."""


def _runtime(world, policy: str = "memspec", **cfg) -> DraftRuntime:
    pol = make_policy(policy, predictor=world.predictor, oracle=world.trace)
    return DraftRuntime(world.engine, world.catalogue, Budget.drafts(2), pol, RuntimeConfig(**cfg))


def _raise_after(rounds: int):
    seen = []

    def on_round(stats, session) -> None:
        seen.append(stats)
        if len(seen) >= rounds:
            raise _Fault("injected")

    return on_round


def test_failed_turn_rolls_back_to_the_last_completed_turn(world) -> None:
    with _runtime(world) as rt:
        rt.warm_up()
        conv = rt.new_conversation()
        first = rt.generate(DIALOGUE[0].prompt, 12, conversation=conv)
        context_after_first = list(conv.state.token_ids)
        with pytest.raises(_Fault):
            rt.generate(DIALOGUE[1].prompt, 24, conversation=conv, on_round=_raise_after(2))
        assert conv.turns == 1 and conv.state.token_ids == context_after_first
        assert conv.state.scorer.cache_length == len(context_after_first) - 1
        third = rt.generate(DIALOGUE[2].prompt, 12, conversation=conv)

        clean = rt.new_conversation()
        assert rt.generate(DIALOGUE[0].prompt, 12, conversation=clean).output_ids == first.output_ids
        # exactly as if the failed turn had never been sent
        assert rt.generate(DIALOGUE[2].prompt, 12, conversation=clean).output_ids == third.output_ids
        assert conv.state.token_ids == clean.state.token_ids and conv.turns == clean.turns == 2


def test_failed_first_turn_leaves_an_empty_dialogue(world) -> None:
    with _runtime(world) as rt:
        rt.warm_up()
        conv = rt.new_conversation()
        with pytest.raises(_Fault):
            rt.generate(DIALOGUE[0].prompt, 24, conversation=conv, on_round=_raise_after(1))
        assert conv.state is None and conv.turns == 0 and conv.kv_bytes == 0
        rep = rt.generate(DIALOGUE[0].prompt, 8, conversation=conv)
        assert rep.tokens == 8 and conv.turns == 1 and conv.kv_bytes > 0


def test_stalled_round_notices_should_stop(world) -> None:
    """A stalling policy waits for a load that would take ~forever; a stop request ends it at once,
    not after stall_timeout_s."""
    storage = StorageModel(bandwidth_bytes_per_s=100.0)  # a draft takes hours at this speed
    with _runtime(world, "static", storage=storage, load_timeout_s=3600.0, stall_timeout_s=60.0) as rt:
        waiting_since: list[float] = []

        def stop() -> bool:  # 0.3 s into the wait for the load (whatever the prefill took)
            if not waiting_since and rt.loader.pending():
                waiting_since.append(time.monotonic())
            return bool(waiting_since) and time.monotonic() - waiting_since[0] > 0.3

        t0 = time.monotonic()
        rep = rt.generate(DIALOGUE[0].prompt, 16, should_stop=stop)
        assert rep.finish_reason == "cancelled" and rep.tokens == 0
        # Far below stall_timeout_s (60 s), however busy the machine: it stopped when asked.
        assert time.monotonic() - t0 < 30.0
        assert 0.2 < rep.stall_s < 30.0
