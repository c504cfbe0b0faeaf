"""Chat turns and stop strings on the bundled zoo: lossless, incremental, nothing past a stop.

The real zoo, because its tokenizer carries the chat template and its target writes robot
dialogues, so a stop string at the next user line really occurs. Losslessness here means: each
turn's output is the target's own greedy continuation (plain ``transformers.generate``) of the
rendering of the whole conversation so far, cut at the first stop string; and the session's
context (tokens and KV cache) ends exactly where the returned text ends.
"""

from __future__ import annotations

import pytest

from memspec_ros.bundled_models import bundled_zoo_root
from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.model_loading import load_causal_lm, load_tokenizer
from memspec_ros.core.sampling import SamplingParams
from memspec_ros.runtime import Budget, Catalogue, DraftRuntime, FinishReason, RuntimeConfig, make_policy
from memspec_ros.runtime.chat import ChatMessage, ChatTurn, common_prefix, fit_chat, merged, render_ids
from memspec_ros.runtime.conversation import Conversation
from memspec_ros.runtime.turns import fit_turn

SYSTEM = "You are a helpful indoor service robot."
STOP = ("\nUSER:",)
USER_TURNS = ("Go to the kitchen", "Pick up the red cup in the kitchen", "Bring the red cup to the office",
              "What is your battery level?", "Stop right there")


@pytest.fixture(scope="module")
def zoo_runtime():
    root = bundled_zoo_root()
    engine = SpeculativeEngine(load_causal_lm(root / "target"), load_tokenizer(root / "target"))
    catalogue = Catalogue.from_dirs({"draft-robot": root / "draft-robot"})
    with DraftRuntime(engine, catalogue, Budget.drafts(1), make_policy("static", static_draft="draft-robot"),
                      RuntimeConfig()) as rt:
        rt.warm_up()
        yield rt


def _expected(engine: SpeculativeEngine, ids: list[int], max_new_tokens: int) -> str:
    """The target's own greedy continuation of ``ids``, decoded and cut at the first stop string."""
    text = engine.tokenizer.decode(engine.target_greedy(ids, max_new_tokens), skip_special_tokens=True,
                                   clean_up_tokenization_spaces=False)
    cut = [i for i in (text.find(s) for s in STOP) if i >= 0]
    return text[:min(cut)] if cut else text


def test_a_chat_session_is_the_targets_greedy_continuation_of_its_rendering(zoo_runtime) -> None:
    """Five turns with a system prompt and a stop string: each output is lossless, the cache is
    reused (only the new turn is prefilled), and the context never holds text past a stop."""
    rt, engine = zoo_runtime, zoo_runtime.engine
    conv = Conversation(chat=True)
    history: list[ChatMessage] = []
    reasons = set()
    for i, user in enumerate(USER_TURNS):
        turn = ChatTurn((ChatMessage("user", user),), SYSTEM if i == 0 else "")
        rendered = render_ids(engine, merged(history, turn))
        before = list(conv.state.token_ids) if conv.state is not None else []
        if before:
            assert common_prefix(before, rendered) >= len(before) - 2, "the cached history must be reused"
        admission = rt.admit(turn, 48, STOP)
        assert admission.problem is None, admission.problem
        deltas: list[str] = []
        report = rt.run_turn(admission.request, conversation=conv,
                             on_progress=lambda p, out=deltas: out.append(p.delta))
        assert report.text == _expected(engine, rendered, 48), f"turn {i}"
        assert report.reused_tokens == (common_prefix(before, rendered) if before else 0)
        assert report.prompt_tokens == len(rendered) - report.reused_tokens - (0 if before else 1)
        assert "".join(deltas) == report.text
        assert report.seed is not None
        reasons.add(report.finish_reason)
        history = [*merged(history, turn), ChatMessage("assistant", report.text)]
        assert conv.messages == history
        state = conv.state
        context = engine.tokenizer.decode(state.token_ids, skip_special_tokens=True,
                                          clean_up_tokenization_spaces=False)
        rendered_text = engine.tokenizer.decode(rendered, clean_up_tokenization_spaces=False)
        assert context == rendered_text + report.text, "the context ends exactly where the answer does"
        assert state.scorer.cache_length == len(state.token_ids) - 1, "the KV cache matches the tokens"
    assert FinishReason.STOP in reasons, f"no turn ended at the stop string: {reasons}"


def test_a_stop_inside_a_token_keeps_the_text_exactly_and_the_next_turn_is_lossless(zoo_runtime) -> None:
    """Cut in the middle of a token: the partial token's characters before the stop are re-encoded;
    the next turn continues from exactly those tokens like the target would."""
    rt, engine = zoo_runtime, zoo_runtime.engine
    prompt = "USER: Go to the kitchen\nROBOT:"
    free = rt.generate(prompt, 24)
    ids = free.output_ids
    pieces = [engine.tokenizer.decode([t]) for t in ids]
    k = next(i for i, p in enumerate(pieces) if len(p.strip()) >= 4)  # a token with several characters
    offset = len(engine.tokenizer.decode(ids[:k])) + 2
    stop = free.text[offset:offset + 3]
    expected_text = free.text[:free.text.find(stop)]
    conv = rt.new_conversation()
    cut = rt.generate(prompt, 24, conversation=conv, stop=[stop])
    assert cut.finish_reason is FinishReason.STOP and cut.text == expected_text
    state = conv.state
    assert engine.tokenizer.decode(state.output_ids) == expected_text
    assert state.scorer.cache_length == len(state.token_ids) - 1
    context = list(state.token_ids)
    nxt = rt.generate("\nUSER: Now stop\nROBOT:", 16, conversation=conv)
    follow = engine.encode("\nUSER: Now stop\nROBOT:", add_special_tokens=False)
    assert nxt.output_ids == engine.target_greedy([*context, *follow], 16)


def test_a_session_rendered_differently_falls_back_to_the_common_prefix(zoo_runtime) -> None:
    """A new system prompt changes the first line: the cache is cut back to what still agrees
    (here: nothing), the turn is still the target's continuation of the new rendering."""
    rt, engine = zoo_runtime, zoo_runtime.engine
    conv = Conversation(chat=True)
    first = ChatTurn((ChatMessage("user", "Go to the lab"),), "You are a robot.")
    rt.run_turn(rt.admit(first, 16, STOP).request, conversation=conv)
    second = ChatTurn((ChatMessage("user", "Stop"),), "You are a careful robot.")
    rendered = render_ids(engine, merged(conv.messages, second))
    report = rt.run_turn(rt.admit(second, 16, STOP).request, conversation=conv)
    assert report.text == _expected(engine, rendered, 16)
    assert conv.messages[0] == ChatMessage("system", "You are a careful robot.")


def test_a_prompt_session_refuses_messages_and_a_failed_chat_turn_restores_the_history(zoo_runtime) -> None:
    rt = zoo_runtime
    prompt_conv = rt.new_conversation()
    rt.generate("USER: hi\nROBOT:", 4, conversation=prompt_conv)
    chat = ChatTurn((ChatMessage("user", "hi"),))
    with pytest.raises(Exception, match="prompt session"):
        fit_turn(rt.engine, prompt_conv, rt.admit(chat, 4).request)

    conv = Conversation(chat=True)
    rt.run_turn(rt.admit(chat, 8, STOP).request, conversation=conv)
    kept = list(conv.messages)
    with pytest.raises(RuntimeError, match="boom"):
        rt.run_turn(rt.admit(ChatTurn((ChatMessage("user", "again"),)), 8).request, conversation=conv,
                    on_round=lambda *_: (_ for _ in ()).throw(RuntimeError("boom")))
    assert conv.messages == kept
    again = rt.run_turn(rt.admit(ChatTurn((ChatMessage("user", "again"),)), 8, STOP).request, conversation=conv)
    rendered = render_ids(rt.engine, [*kept, ChatMessage("user", "again")])
    assert again.text == _expected(rt.engine, rendered, 8)


def test_a_drawn_seed_is_reported_and_replays_the_sample(zoo_runtime) -> None:
    rt = zoo_runtime
    turn = rt.admit(ChatTurn((ChatMessage("user", "Go to the garage"),)), 24, STOP).request
    drawn = rt.run_turn(turn, SamplingParams(temperature=1.0, top_k=20), conversation=Conversation(chat=True))
    assert drawn.seed is not None and drawn.seed > 0
    replay = rt.run_turn(turn, SamplingParams(temperature=1.0, top_k=20, seed=drawn.seed),
                         conversation=Conversation(chat=True))
    assert replay.text == drawn.text and replay.seed == drawn.seed


def test_a_chat_that_outgrows_the_window_drops_its_oldest_exchanges_and_keeps_the_system_prompt(zoo_runtime) -> None:
    engine = SpeculativeEngine(zoo_runtime.engine.target, zoo_runtime.engine.tokenizer, max_context=120)
    history = [ChatMessage("system", SYSTEM)]
    for i in range(6):
        history += [ChatMessage("user", f"Go to the lab number {i}"), ChatMessage("assistant", f"Okay. Lab {i}.")]
    turn = ChatTurn((ChatMessage("user", "Now stop"),))
    fitted = fit_chat(engine, history, turn, 40)
    assert fitted.messages[0] == ChatMessage("system", SYSTEM)
    assert fitted.messages[-1] == ChatMessage("user", "Now stop")
    assert fitted.dropped > 0 and list(fitted.messages[1:-1]) == history[1 + fitted.dropped:]
    assert len(fitted.ids) + 40 <= 120 and fitted.ids == render_ids(engine, list(fitted.messages))
    assert fitted.messages[1].role == "user", "cut on an exchange boundary: the kept history starts with a question"
    assert len(fitted.ids) <= 120 // 2, "a slide goes to half the window, so the next turn does not slide again"
    # An exchange is a user message and everything that answers it (here two assistant messages).
    chatty = [ChatMessage("system", SYSTEM)]
    for i in range(6):
        chatty += [ChatMessage("user", f"Go to lab {i}"), ChatMessage("assistant", "Okay."),
                   ChatMessage("assistant", f"At lab {i}.")]
    fitted = fit_chat(engine, chatty, turn, 40)
    assert fitted.dropped % 3 == 0 and fitted.messages[1].role == "user", fitted.messages
    with pytest.raises(Exception, match="context window"):
        fit_chat(engine, history, ChatTurn((ChatMessage("user", "word " * 200),)), 40)
