"""The runtime's serving API on real (tiny) models: admission, sliding, hints, deltas, stop reasons.

What a server (the ROS node) needs between a request and the round loop; the node only
translates these into ROS terms, so they are checked here without any node process.
"""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer
from tokenizers.processors import TemplateProcessing
from transformers import PreTrainedTokenizerFast

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.runtime import Budget, DraftRuntime, FinishReason, RuntimeConfig, make_policy

from .rt_tiny_zoo import DIALOGUE

WINDOW = 96
"""Context window of the sliding tests' engine: a few turns of the tiny dialogue overflow it."""


def _runtime(world, engine: SpeculativeEngine | None = None, policy: str = "memspec") -> DraftRuntime:
    pol = make_policy(policy, predictor=world.predictor, oracle=world.trace)
    return DraftRuntime(engine or world.engine, world.catalogue, Budget.drafts(2), pol, RuntimeConfig())


def _bos_tokenizer(world) -> PreTrainedTokenizerFast:
    """The tiny zoo's tokenizer, made to put a BOS before every text (as Llama's does)."""
    backend = Tokenizer.from_str(world.engine.tokenizer.backend_tokenizer.to_str())
    bos = world.engine.tokenizer.bos_token_id
    backend.post_processor = TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def test_an_opening_turn_is_exactly_the_prompt_tokenised_with_special_tokens(world) -> None:
    engine = SpeculativeEngine(world.engine.target, _bos_tokenizer(world))
    assert engine.special_prefix == [engine.tokenizer.bos_token_id] and engine.special_suffix == []
    for turn in DIALOGUE:
        assert engine.opening(engine.encode(turn.prompt, add_special_tokens=False)) == engine.encode(turn.prompt)


def test_admission_tokenises_once_and_refuses_what_cannot_fit(world) -> None:
    with _runtime(world) as rt:
        ok = rt.admit(DIALOGUE[0].prompt, 8)
        assert ok.problem is None
        assert list(ok.request.turn_ids) == world.engine.encode(DIALOGUE[0].prompt, add_special_tokens=False)
        too_long = rt.admit(DIALOGUE[0].prompt, world.engine.max_context)
        assert too_long.request is None and "shorten the prompt or ask for fewer tokens" in too_long.problem
        assert "empty" in rt.admit("", 8).problem


def test_an_admitted_dialogue_is_token_for_token_the_targets(world, reference_outputs) -> None:
    with _runtime(world) as rt:
        rt.warm_up()
        conv = rt.new_conversation()
        outs = [rt.run_turn(rt.admit(t.prompt, t.max_new_tokens).request, conversation=conv).output_ids
                for t in DIALOGUE]
    assert outs == reference_outputs


def test_a_dialogue_that_outgrows_the_window_slides_and_a_failed_turn_undoes_the_slide(world) -> None:
    engine = SpeculativeEngine(world.engine.target, world.engine.tokenizer, max_context=WINDOW)
    with _runtime(world, engine) as rt:
        conv = rt.new_conversation()
        prompt = DIALOGUE[0].prompt
        slid = None
        for _ in range(20):
            before = list(conv.state.token_ids) if conv.state is not None else []
            report = rt.run_turn(rt.admit(prompt, 16).request, conversation=conv)
            if report.kept_tokens is not None:
                slid = (before, report)
                break
        assert slid is not None, "the dialogue never reached the window"
        before, report = slid
        assert 0 < report.kept_tokens <= WINDOW // 2
        assert conv.turns == 1 and conv.context_tokens <= WINDOW
        turn_ids = engine.encode(prompt, add_special_tokens=False)
        assert conv.state.token_ids[:report.kept_tokens + len(turn_ids)] == [
            *before[len(before) - report.kept_tokens:], *turn_ids]

        # the next overflowing turn fails half-way: the dialogue is back where it was, unslid
        while conv.context_tokens + len(turn_ids) + 16 <= WINDOW:
            rt.run_turn(rt.admit(prompt, 16).request, conversation=conv)
        full = list(conv.state.token_ids)

        def fault(stats, state) -> None:
            raise RuntimeError("injected")

        with pytest.raises(RuntimeError, match="injected"):
            rt.run_turn(rt.admit(prompt, 16).request, conversation=conv, on_round=fault)
        assert conv.state.token_ids == full


def test_a_goal_hint_is_scoped_and_a_planners_hint_during_it_survives(world) -> None:
    with _runtime(world) as rt:
        rt.set_hint("copy")
        with rt.hint_scope(None):
            assert rt.view().hint == "copy", "no goal hint: the standing one applies"
        with rt.hint_scope("math"):
            assert rt.view().hint == "math"
            rt.set_hint(None)  # a planner clears its hint while the goal runs
            assert rt.view().hint == "math"
        assert rt.view().hint is None and rt.hint is None
        with pytest.raises(ValueError, match="unknown domain"), rt.hint_scope("astrology"):
            pass
        assert rt.hint_problem("astrology").startswith("not a draft domain")
        assert rt.hint_problem("copy") is None


def test_deltas_add_up_to_the_text_and_a_stop_is_not_a_cancel(world) -> None:
    with _runtime(world) as rt:
        rt.warm_up()
        every_round, every_third = [], []
        full = rt.generate(DIALOGUE[0].prompt, 24, on_progress=every_round.append)
        assert "".join(p.delta for p in every_round) == full.text
        assert every_round[-1].tokens == full.tokens
        thirds = rt.generate(DIALOGUE[0].prompt, 24, on_progress=every_third.append, progress_every=3)
        assert "".join(p.delta for p in every_third) == thirds.text == full.text
        assert len(every_third) < len(every_round)

        conv = rt.new_conversation()
        rounds = []
        stopped = rt.generate(DIALOGUE[0].prompt, 40, conversation=conv, on_round=lambda s, st: rounds.append(s),
                              should_stop=lambda: FinishReason.DEACTIVATED if len(rounds) >= 2 else None)
        assert stopped.finish_reason is FinishReason.DEACTIVATED and stopped.rounds == 2
        cancelled = rt.generate(DIALOGUE[1].prompt, 40, conversation=conv, should_stop=lambda: True)
        assert cancelled.finish_reason is FinishReason.CANCELLED and cancelled.finish_reason.interrupted
        nxt = rt.generate(DIALOGUE[2].prompt, 8, conversation=conv)
        assert nxt.tokens == 8 and conv.turns == 3 and nxt.finish_reason == "length"


def test_plan_and_apply_separately_move_the_working_set_like_tick(world) -> None:
    with _runtime(world, policy="memspec") as rt:
        assert rt.apply() is None, "nothing to apply before the first plan"
        rt.set_hint("math")
        plan = rt.plan()
        assert plan.want and not rt.loader.pending() and rt.pool.resident() == []
        assert rt.apply() is plan
        wanted = set(plan.want[:2])
        assert wanted & (set(rt.loader.pending()) | set(rt.pool.resident())) == wanted
        assert rt.statistics().ticks == 1
