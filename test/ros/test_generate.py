"""The node serving generation: a real node process, real models, real DDS (LOCALHOST).

One node process is shared by the tests of this module (starting one loads the target and
the initial working set); tests that need other parameters start their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from action_msgs.msg import GoalStatus
from diagnostic_msgs.msg import DiagnosticArray
from memspec_interfaces.action import Generate
from memspec_interfaces.msg import AcceptanceStats, ChatMessage, DraftResidency, DraftState
from prompts import CODE_PROMPT, LEGAL_PROMPT, LONG_TOKENS, MATH_PROMPT, ROBOT_PROMPT
from rclpy.action import ActionClient
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from std_msgs.msg import String

from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess
from memspec_ros.ros.qos import REJECTIONS_QOS, RESIDENCY_LOG_QOS
from memspec_ros.runtime.chat import ChatMessage as Message
from memspec_ros.runtime.chat import ChatTurn, fit_chat, merged, render_ids

DIALOGUE = [("robot", ROBOT_PROMPT), ("code", CODE_PROMPT), ("math", MATH_PROMPT), ("legal", LEGAL_PROMPT)]
LONG_PROMPTS = (CODE_PROMPT, LEGAL_PROMPT)
"""Goals for these are still generating when a test cancels, deactivates or sends a second goal."""


class Recorder:
    """Collects every message of a topic with its arrival time."""

    def __init__(self) -> None:
        self.messages: list[tuple[float, object]] = []
        self._lock = threading.Lock()

    def __call__(self, msg: object) -> None:
        with self._lock:
            self.messages.append((time.monotonic(), msg))

    def since(self, t0: float) -> list[object]:
        with self._lock:
            return [m for t, m in self.messages if t >= t0]

    def wait_for(self, predicate, timeout_s: float = 30.0) -> object | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                for _, m in reversed(self.messages):
                    if predicate(m):
                        return m
            time.sleep(0.05)  # polling a recorder filled by the executor thread
        return None


@pytest.fixture(scope="module")
def served(client_node: Node, params_file) -> Iterator[dict]:
    """An active node with emulated slow storage, plus recorders on its topics."""
    recorders = {"residency": Recorder(), "stats": Recorder(), "diagnostics": Recorder(), "rejections": Recorder()}
    subs = [
        client_node.create_subscription(
            DraftResidency, "/memspec/draft_residency", recorders["residency"], RESIDENCY_LOG_QOS
        ),
        client_node.create_subscription(AcceptanceStats, "/memspec/acceptance_stats", recorders["stats"], 50),
        client_node.create_subscription(DiagnosticArray, "/diagnostics", recorders["diagnostics"], 50),
        client_node.create_subscription(String, "/memspec/goal_rejections", recorders["rejections"], REJECTIONS_QOS),
    ]
    overrides = {"autostart": True, "storage_bandwidth_mbps": 40.0, "stats_period_s": 0.1, "diagnostics_period_s": 0.1}
    with NodeProcess(params_file, overrides=overrides) as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_state("active", alive=node.alive), node.log()
        gen = GenerateClient(client_node)
        assert gen.wait_for_server(30.0), node.log()
        yield {"node": node, "lifecycle": lc, "gen": gen, **recorders}
        gen.destroy()
    for sub in subs:
        client_node.destroy_subscription(sub)


def test_multi_turn_dialogue_with_topic_shifts(served) -> None:
    gen = served["gen"]
    t0 = time.monotonic()
    results = []
    for domain, prompt in DIALOGUE:
        call = gen.generate(make_goal(prompt, 48, session_id="dialogue-1"), timeout_s=120)
        assert call.succeeded, (domain, call.result, served["node"].log())
        assert call.result.num_tokens > 0
        assert call.streamed_text == call.result.text, "feedback deltas must add up to the result text"
        results.append(call.result)
    drafts_used = {d for r in results for d in r.drafts_used}
    assert len(drafts_used) >= 2, f"a dialogue across domains should use several drafts: {drafts_used}"
    residency = served["residency"].since(t0)
    assert residency, "no residency messages during the dialogue"
    for msg in residency:
        assert msg.used_bytes <= msg.budget_bytes
    states = {(d.name, d.state) for m in residency for d in m.drafts}
    assert any(s == DraftState.LOADING for _, s in states), "no prefetch seen (no LOADING state)"
    stats = served["stats"].since(t0)
    assert stats, "no acceptance_stats published during generation"
    assert any(m.rounds > 0 for m in stats)
    diagnostics = served["diagnostics"].since(t0)
    assert diagnostics and any("policy" in {kv.key for kv in s.values} for m in diagnostics for s in m.status)


def test_one_shot_greedy_output_is_the_targets(served, zoo_engine) -> None:
    prompt = "Problem: Solve 2*x - 8 = 0 for x.\nSolution:"
    call = served["gen"].generate(make_goal(prompt, 40), timeout_s=120)
    assert call.succeeded
    expected = zoo_engine.tokenizer.decode(
        zoo_engine.target_greedy(prompt, 40), skip_special_tokens=True, clean_up_tokenization_spaces=False
    )
    assert call.result.text == expected


def _wait_future(future, timeout_s: float = 120.0):
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout_s), "no answer"
    return future.result()


def test_a_plain_rclpy_action_client_with_default_qos_is_served(served, client_node, zoo_engine) -> None:
    """A robot stack's own client: rclpy's ActionClient, every QoS left at its default, feedback
    through the goal's callback. It gets the target's greedy text, streamed, and a rejection
    as a goal that is not accepted."""
    # rclpy's own class on a node that already spins can meet ros2/rclpy#1589; the client
    # executor survives that (resilient_spin), as a robot stack's would need to.
    client = ActionClient(client_node, Generate, "/memspec/generate")
    try:
        assert client.wait_for_server(30.0)
        prompt = "USER: Please bring the red cup to the kitchen.\nROBOT:"
        deltas: list[str] = []
        handle = _wait_future(client.send_goal_async(make_goal(prompt, 32),
                                                     feedback_callback=lambda f: deltas.append(f.feedback.delta)))
        assert handle.accepted
        response = _wait_future(handle.get_result_async())
        assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.message
        expected = zoo_engine.tokenizer.decode(zoo_engine.target_greedy(prompt, 32), skip_special_tokens=True,
                                               clean_up_tokenization_spaces=False)
        assert response.result.text == expected
        assert deltas and expected.startswith("".join(deltas))  # rclpy drops feedback after the result
        rejected = _wait_future(client.send_goal_async(make_goal("bell\x07", 8)))
        assert not rejected.accepted
    finally:
        client.destroy()


def _callback_calls(msg: DiagnosticArray) -> dict[str, int]:
    """The prediction and prefetch call counters of a /diagnostics message (empty if absent)."""
    values = {kv.key: kv.value for s in msg.status for kv in s.values}
    return {k: int(values[f"{k}_calls"]) for k in ("prediction", "prefetch") if f"{k}_calls" in values}


def test_prefetch_completes_while_a_generation_runs(served) -> None:
    """A draft on storage is loaded in the background and drafted with during one goal.

    Checked on events, not on how long a goal takes: the goal's own feedback names the draft
    it drafts with, and /diagnostics comes every ``diagnostics_period_s`` (0.1 s here). The
    goal is a long prompt (no end-of-sequence within ``LONG_TOKENS``), so it outlasts a load
    by far even on a fast machine.
    """
    gen = served["gen"]
    latest = served["residency"].wait_for(lambda m: True)
    assert latest is not None
    absent = {d.name for d in latest.drafts if d.state == DraftState.ON_STORAGE}
    candidates = [(d, p) for d, p in DIALOGUE if f"draft-{d}" in absent]
    assert candidates, f"every draft is resident: {latest.drafts}"
    domain, prompt = next(((d, p) for d, p in candidates if p in LONG_PROMPTS), candidates[0])
    name = f"draft-{domain}"
    before = _callback_calls(served["diagnostics"].wait_for(lambda m: bool(_callback_calls(m))))
    t0 = time.monotonic()
    call = gen.send(make_goal(prompt, LONG_TOKENS))
    assert call.wait_accepted()
    result = call.wait(120)
    t1 = time.monotonic()
    assert result.num_tokens > 0
    # Both executor callbacks ran while the goal was generating: a /diagnostics message
    # published during the goal counts more prediction and more prefetch calls than before it.
    during = [_callback_calls(m) for t, m in served["diagnostics"].messages if t0 <= t <= t1]
    assert any(c["prediction"] > before["prediction"] and c["prefetch"] > before["prefetch"] for c in during), \
        (before, during)
    during = [m for t, m in served["residency"].messages if t0 <= t <= t1]
    loading = {d.name for m in during for d in m.drafts if d.state == DraftState.LOADING}
    completed = {d.name for m in during for d in m.drafts if d.state == DraftState.RESIDENT and d.name in loading}
    assert name in completed, f"no prefetch of {name} completed (loading seen: {loading})"
    assert name in {f.active_draft for f in call.feedback}, "the loaded draft was never drafted with during the goal"
    assert result.stall_seconds == 0.0, "memspec never waits for a load"
    assert name in result.drafts_used


def test_the_ngram_member_is_on_the_residency_topic_and_in_diagnostics(served) -> None:
    """The node's default: the n-gram member is always RESIDENT at 0 bytes, outside the budget, and named so."""
    latest = served["residency"].wait_for(lambda m: any(d.name == "ngram" for d in m.drafts))
    assert latest is not None, "the residency topic never listed the n-gram member"
    member = next(d for d in latest.drafts if d.name == "ngram")
    assert member.state == DraftState.RESIDENT and member.size_bytes == 0 and member.load_progress == 1.0
    assert latest.used_bytes == sum(d.size_bytes for d in latest.drafts if d.state != DraftState.ON_STORAGE)
    diag = served["diagnostics"].wait_for(lambda m: any(kv.key == "ngram" for s in m.status for kv in s.values))
    assert diag is not None
    values = {kv.key: kv.value for s in diag.status for kv in s.values}
    assert values["ngram"].startswith("on (n 2-4)") and "ngram" in values["resident_drafts"].split(",")


def test_long_prompts_do_not_end_early(zoo_engine) -> None:
    for prompt in LONG_PROMPTS:
        assert len(zoo_engine.target_greedy(prompt, LONG_TOKENS)) == LONG_TOKENS


def _wait_streaming(call) -> None:
    """Block until the goal has streamed its first tokens (it is running, not queued)."""
    deadline = time.monotonic() + 60
    while not call.feedback and time.monotonic() < deadline:
        time.sleep(0.01)  # feedback arrives on the client's executor thread
    assert call.feedback, "the goal never streamed"


def test_cancel_within_a_round(served) -> None:
    gen = served["gen"]
    call = gen.send(make_goal(LONG_PROMPTS[1], LONG_TOKENS))
    assert call.wait_accepted()
    _wait_streaming(call)
    call.cancel()
    result = call.wait(60)
    assert "cancel" in result.message.lower(), result.message
    assert result.finish_reason == "cancelled"
    assert result.num_tokens < LONG_TOKENS


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("prompt", "", "empty"),
        ("prompt", "x" * 10_001, "characters"),
        ("prompt", "bell\x07", "control"),
        ("max_new_tokens", 10**9, "max_new_tokens"),
        ("stop", ["\nUSER:", ""], "empty"),
        ("system_prompt", "Be brief.", "system_prompt needs messages"),
        ("messages", [ChatMessage(role="user", content="hi")], "both prompt and messages"),
        ("temperature", -1.0, "temperature"),
        ("temperature", float("nan"), "temperature"),
        ("top_p", 0.0, "top_p"),
        ("top_p", 1.5, "top_p"),
        ("domain_hint", "cooking", "domain_hint"),
    ],
)
def test_bad_goals_are_rejected_with_a_reason(served, field, value, reason) -> None:
    goal = make_goal("USER: hello\nROBOT:", 8)
    setattr(goal, field, value)
    t0 = time.monotonic()
    call = served["gen"].send(goal)
    assert call.wait_accepted() is False
    msg = served["rejections"].wait_for(lambda m: reason in m.data, timeout_s=10)
    assert msg is not None, [m.data for m in served["rejections"].since(t0)]


def test_prompt_past_the_context_is_rejected(served) -> None:
    call = served["gen"].send(make_goal("word " * 1900, 500))
    assert call.wait_accepted() is False


def test_busy_node_rejects_a_second_goal(served) -> None:
    gen = served["gen"]
    first = gen.send(make_goal(LONG_PROMPTS[0], LONG_TOKENS))
    assert first.wait_accepted()
    second = gen.send(make_goal(DIALOGUE[0][1], 8))
    assert second.wait_accepted() is False
    first.cancel()
    assert first.result is None or first.result.num_tokens < LONG_TOKENS, "the first goal ended before the second"
    first.wait(60)


def test_runtime_parameters(served, client_node) -> None:
    params = AsyncParameterClient(client_node, "/memspec")
    assert params.wait_for_services(10.0)
    ok = params.set_parameters([Parameter("policy", value="hedge"), Parameter("check_interval", value=2)])
    _done(ok)
    assert all(r.successful for r in ok.result().results)
    refused = params.set_parameters([Parameter("budget_drafts", value=3)])
    _done(refused)
    assert not refused.result().results[0].successful
    assert "budget_drafts" in refused.result().results[0].reason
    auto = params.set_parameters([Parameter("num_speculative_tokens", value=0)])
    _done(auto)
    assert not auto.result().results[0].successful  # auto is a configure-time choice
    assert "resolved at configure" in auto.result().results[0].reason
    call = served["gen"].generate(make_goal(DIALOGUE[0][1], 24), timeout_s=120)
    assert call.succeeded
    _done(params.set_parameters([Parameter("policy", value="memspec"), Parameter("check_interval", value=4)]))


def test_deactivate_during_generation_ends_it_cleanly(served) -> None:
    gen, lc = served["gen"], served["lifecycle"]
    call = gen.send(make_goal(LONG_PROMPTS[0], LONG_TOKENS))
    assert call.wait_accepted()
    _wait_streaming(call)
    assert lc.change_state("deactivate")
    result = call.wait(60)
    assert "deactivat" in result.message.lower()
    assert result.finish_reason == "deactivated"
    assert not gen.send(make_goal("USER: hi\nROBOT:", 4)).wait_accepted()
    assert lc.change_state("activate")
    assert gen.generate(make_goal("USER: hi\nROBOT:", 4), timeout_s=60).succeeded


def test_context_hint_prefetches_that_domains_draft(client_node, params_file) -> None:
    """A planner's hint alone (no goal) makes the node bring that domain's draft in."""
    rec = Recorder()
    sub = client_node.create_subscription(DraftResidency, "/memspec/draft_residency", rec, RESIDENCY_LOG_QOS)
    pub = client_node.create_publisher(String, "/memspec/context_hint", 10)
    started = time.time()

    def fresh(m) -> bool:  # not a latched (transient-local) message of an earlier node
        return m.stamp.sec + m.stamp.nanosec * 1e-9 >= started

    with NodeProcess(params_file, overrides={"autostart": True, "budget_drafts": 1}) as node:
        assert LifecycleClient(client_node).wait_for_state("active", alive=node.alive), node.log()
        first = rec.wait_for(lambda m: fresh(m) and any(d.state == DraftState.RESIDENT for d in m.drafts), 60)
        assert first is not None, node.log()
        assert not any(d.name == "draft-legal" and d.state == DraftState.RESIDENT for d in first.drafts)
        # A volatile publisher's message is lost while discovery has matched only one side of
        # the connection (the publisher may already count the subscription while the node's
        # side has not matched the publisher yet), so the hint is repeated, as a planner
        # restating its context would, until the draft is resident. Repeats are idempotent.
        deadline = time.monotonic() + 30
        while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pub.get_subscription_count() >= 1, "the node's context_hint subscription never matched"
        hit = None
        while hit is None and time.monotonic() < deadline + 30:
            pub.publish(String(data="legal"))
            hit = rec.wait_for(
                lambda m: fresh(m) and any(d.name == "draft-legal" and d.state == DraftState.RESIDENT
                                           for d in m.drafts), 2
            )
        assert hit is not None, node.log()
    client_node.destroy_subscription(sub)
    client_node.destroy_publisher(pub)


def _done(future, timeout_s: float = 10.0) -> None:
    event = threading.Event()
    future.add_done_callback(lambda _f: event.set())
    assert event.wait(timeout_s), "parameter service did not answer"


def test_long_session_slides_past_the_context_window(served) -> None:
    """A dialogue longer than the context window keeps going: its oldest turns are dropped."""
    gen = served["gen"]
    prompt = DIALOGUE[0][1] + " and then" * 40
    # each turn adds ~100 prompt tokens plus up to 200 generated ones (fewer when the target
    # ends its answer early), so at most 11 turns pass the 1024-token window
    for turn in range(12):
        call = gen.generate(make_goal(prompt, 200, session_id="long-session"), timeout_s=120)
        assert call.succeeded, (turn, call.result)
        if "reached the context window" in served["node"].log():
            break
    assert "reached the context window" in served["node"].log()
    call = gen.generate(make_goal(prompt, 50, session_id="long-session"), timeout_s=120)
    assert call.succeeded and call.result.num_tokens > 0, call.result


def test_each_turn_of_a_session_uses_its_own_sampling_settings(served) -> None:
    """Turn 2 samples with its own seed (not turn 1's greedy settings) and reports that seed.

    Two sessions with the same seed and context need not give the same sample: the guard picks
    drafts by measured speed, and the draft choices decide how the seeded generator is consumed
    (each text is an exact sample of the target; the engine tests pin a draft and check that a
    replay repeats the text).
    """
    gen = served["gen"]
    texts = {}
    for sid in ("sampled-a", "greedy-c"):
        gen.generate(make_goal(DIALOGUE[0][1], 16, session_id=sid), timeout_s=120)
        temperature = 0.0 if sid.startswith("greedy") else 1.0
        call = gen.generate(make_goal("\nUSER: Now go to the lab\nROBOT:", 32, session_id=sid,
                                      temperature=temperature, seed=7), timeout_s=120)
        assert call.succeeded
        assert call.result.seed == 7
        texts[sid] = call.result.text
    assert texts["sampled-a"] != texts["greedy-c"], "turn 2 must sample, not reuse turn 1's greedy settings"


def test_a_goal_that_sets_only_a_prompt_succeeds_with_the_defaults(served) -> None:
    """Every other field at its interface default: greedy, the node's default_max_new_tokens, a drawn seed."""
    call = served["gen"].generate(Generate.Goal(prompt=ROBOT_PROMPT), timeout_s=120)
    assert call.succeeded, (call.result, served["node"].log())
    assert 0 < call.result.num_tokens <= 128  # config/memspec.yaml's default_max_new_tokens
    assert call.result.finish_reason in ("eos", "length"), call.result.finish_reason
    assert call.result.seed != 0, "seed 0 means: draw one and report it"
    short = served["gen"].generate(make_goal(ROBOT_PROMPT, 3), timeout_s=120)
    assert short.result.finish_reason == "length" and short.result.num_tokens == 3


def test_a_chat_session_with_a_system_prompt_and_stop_strings_is_lossless(served, zoo_engine) -> None:
    """Five turns of messages: each answer is the target's own greedy continuation of the rendering of
    the whole conversation so far (its earlier answers included, as the node stored them), cut at
    the first stop string; nothing past a stop is streamed or kept (the next turn would differ)."""
    gen = served["gen"]
    system, stop = "You are a helpful indoor service robot.", ["\nUSER:"]
    users = ("Go to the kitchen", "Pick up the red cup in the kitchen", "Bring the red cup to the office",
             "What is your battery level?", "Stop right there")
    history: list[Message] = []
    reasons = set()
    for i, user in enumerate(users):
        turn = ChatTurn((Message("user", user),), system if i == 0 else "")
        rendered = render_ids(zoo_engine, merged(history, turn))
        call = gen.generate(make_goal(messages=[("user", user)], system_prompt=turn.system_prompt, stop=stop,
                                      max_new_tokens=40, session_id="chat-1"), timeout_s=120)
        assert call.succeeded, (i, call.result, served["node"].log())
        greedy = zoo_engine.tokenizer.decode(zoo_engine.target_greedy(rendered, 40), skip_special_tokens=True,
                                             clean_up_tokenization_spaces=False)
        expected = greedy[:greedy.find(stop[0])] if stop[0] in greedy else greedy
        assert call.result.text == expected, (i, call.result.text, greedy)
        assert call.streamed_text == call.result.text and stop[0] not in call.streamed_text
        reasons.add(call.result.finish_reason)
        history = [*merged(history, turn), Message("assistant", call.result.text)]
    assert "stop" in reasons, reasons
    as_prompt = gen.send(make_goal("USER: hi\nROBOT:", 4, session_id="chat-1"))
    assert as_prompt.wait_accepted() is False
    assert served["rejections"].wait_for(lambda m: "opened with messages" in m.data, timeout_s=10) is not None


def test_the_persona_survives_a_window_slide(served, zoo_engine) -> None:
    """A chat outgrowing the context window loses its oldest exchanges, never its system prompt:
    every answer, before and after the slide, is the target's greedy continuation of what
    ``fit_chat`` keeps (system prompt first), rendered with the chat template."""
    gen = served["gen"]
    system = "You are Ada, the lab robot. You always answer politely."
    history: list[Message] = []
    slid_at = None
    for i in range(16):
        user = f"Request {i}: please carry box {i} " + "to the far storage room " * 12
        turn = ChatTurn((Message("user", user),), system if i == 0 else "")
        fitted = fit_chat(zoo_engine, history, turn, 40)
        call = gen.generate(make_goal(messages=[("user", user)], system_prompt=turn.system_prompt,
                                      max_new_tokens=40, session_id="persona"), timeout_s=120)
        assert call.succeeded, (i, call.result, served["node"].log())
        greedy = zoo_engine.tokenizer.decode(zoo_engine.target_greedy(fitted.ids, 40), skip_special_tokens=True,
                                             clean_up_tokenization_spaces=False)
        assert call.result.text == greedy, (i, fitted.dropped)
        assert fitted.messages[0] == Message("system", system)
        history = [*fitted.messages, Message("assistant", call.result.text)]
        if fitted.dropped and slid_at is None:
            slid_at = i
        if slid_at is not None and i > slid_at:  # the slide's turn and one after it
            break
    assert slid_at is not None, "the conversation never outgrew the window: make the messages longer"


def test_a_drawn_seed_is_reported_and_can_be_sent_again(served) -> None:
    """The drawn seed comes back in the result and a goal may send it. The replay samples with it,
    but its text equals the first only when the same drafts are chosen (README, the seed row): the
    engine tests pin a draft and check the replay token for token."""
    gen = served["gen"]
    goal = dict(messages=[("user", "Go to the garage")], max_new_tokens=24, temperature=1.0, top_k=40, top_p=0.9)
    drawn = gen.generate(make_goal(**goal), timeout_s=120).result
    assert drawn.seed != 0
    replay = gen.generate(make_goal(**goal, seed=drawn.seed), timeout_s=120)
    assert replay.succeeded and replay.result.seed == drawn.seed and replay.result.num_tokens > 0
