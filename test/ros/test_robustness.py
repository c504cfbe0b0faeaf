"""Faults, bad input, load and lifetime: the node must stay up, explain itself, lose nothing.

Every test runs a real node process over LOCALHOST DDS. The long-running soak (goals back to
back, lifecycle cycles, memory and threads sampled) is ``test_soak.py``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray
from prompts import LEGAL_PROMPT, LONG_TOKENS, ROBOT_PROMPT
from std_msgs.msg import String

from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess
from memspec_ros.ros.qos import REJECTIONS_QOS


def _damage(path: Path, data: bytes) -> None:
    """Replace a (hard-linked) file with new content without touching the bundled original."""
    path.unlink()
    path.write_bytes(data)


def _start_active(client_node, params_file, overrides, timeout_s: float = 180.0):
    node = NodeProcess(params_file, overrides={"autostart": True, **overrides}).__enter__()
    lc = LifecycleClient(client_node)
    if not lc.wait_for_state("active", timeout_s, alive=node.alive):
        node.stop()
        raise AssertionError("node did not become active:\n" + node.log())
    return node, lc


# ---------------------------------------------------------------------- configure-time faults
def test_bad_drafts_fail_configure_naming_each_and_can_be_tolerated(client_node, params_file, zoo_copy) -> None:
    """Four drafts broken four ways in one catalogue: configure fails naming every one of them
    (an operator fixes them all in one go), and with tolerate_bad_drafts the node serves
    without them."""
    _damage(zoo_copy / "draft-code" / "model.safetensors", b"\x00" * 64)  # corrupt
    (zoo_copy / "draft-math" / "model.safetensors").unlink()  # missing
    tok = json.loads((zoo_copy / "draft-legal" / "tokenizer.json").read_text())  # vocabulary mismatch
    vocab = tok["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[300:302]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    _damage(zoo_copy / "draft-legal" / "tokenizer.json", json.dumps(tok).encode())
    (zoo_copy / "draft-prose" / "model.safetensors").unlink()  # pickle weights only: refused
    (zoo_copy / "draft-prose" / "pytorch_model.bin").write_bytes(b"not even a pickle")
    broken = ("draft-code", "draft-math", "draft-legal", "draft-prose")
    with NodeProcess(params_file, overrides={"catalogue": str(zoo_copy)}) as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_services(60.0), node.log()
        assert not lc.change_state("configure")
        assert lc.get_state() == "unconfigured"
        failure = next(line for line in node.log().splitlines() if "configure failed" in line)
        for name in broken:
            assert f"'{name}'" in failure, (name, failure)
        assert "safetensors" in failure.split("'draft-prose'")[1]
        assert "'draft-robot'" not in failure and "'draft-general'" not in failure
    with NodeProcess(params_file, overrides={"catalogue": str(zoo_copy), "tolerate_bad_drafts": True}) as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_services(60.0), node.log()
        assert lc.change_state("configure"), node.log()
        assert lc.change_state("activate")
        gen = GenerateClient(client_node)
        assert gen.wait_for_server(30.0)
        call = gen.generate(make_goal("def main():\n", 24), timeout_s=120)
        assert call.succeeded and not set(broken) & set(call.result.drafts_used)
        gen.destroy()


# ---------------------------------------------------------------------- faults while serving
def test_draft_that_fails_to_load_mid_generation_keeps_output_exact(
    client_node, params_file, zoo_copy, zoo_engine
) -> None:
    """Configure succeeds, then the legal draft's file goes bad: its prefetch fails, decoding
    carries on with what is resident, and the text is still exactly the target's."""
    diags: list[DiagnosticArray] = []
    sub = client_node.create_subscription(DiagnosticArray, "/diagnostics", diags.append, 50)
    node, _ = _start_active(client_node, params_file, {"catalogue": str(zoo_copy)})
    try:
        weights = zoo_copy / "draft-legal" / "model.safetensors"
        _damage(weights, weights.read_bytes()[:100])
        gen = GenerateClient(client_node)
        assert gen.wait_for_server(30.0)
        call = gen.generate(make_goal(LEGAL_PROMPT, 64, domain_hint="legal"), timeout_s=120)
        assert call.succeeded, node.log()
        expected = zoo_engine.tokenizer.decode(zoo_engine.target_greedy(LEGAL_PROMPT, 64), skip_special_tokens=True,
                                               clean_up_tokenization_spaces=False)
        assert call.result.text == expected
        assert "draft-legal" not in call.result.drafts_used
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
            kv.key == "load_failures" and kv.value != "0" for m in diags for s in m.status for kv in s.values
        ):
            time.sleep(0.1)  # diagnostics are published at 1 Hz
        assert any(kv.key == "load_failures" and kv.value != "0" for m in diags for s in m.status for kv in s.values)
        assert node.alive()
        gen.destroy()
    finally:
        node.stop()
        client_node.destroy_subscription(sub)


def test_budget_below_every_draft_serves_target_only(client_node, params_file, zoo_engine) -> None:
    diags: list[DiagnosticArray] = []
    sub = client_node.create_subscription(DiagnosticArray, "/diagnostics", diags.append, 50)
    node, _ = _start_active(client_node, params_file, {"budget_drafts": 0, "budget_bytes": 1000})
    try:
        gen = GenerateClient(client_node)
        assert gen.wait_for_server(30.0)
        call = gen.generate(make_goal(ROBOT_PROMPT, 32), timeout_s=120)
        assert call.succeeded and set(call.result.drafts_used) <= {"ngram"}, "only the n-gram member fits"
        expected = zoo_engine.tokenizer.decode(zoo_engine.target_greedy(ROBOT_PROMPT, 32), skip_special_tokens=True,
                                               clean_up_tokenization_spaces=False)
        assert call.result.text == expected
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("target-only" in s.message for m in diags for s in m.status):
            time.sleep(0.1)  # diagnostics are published at 1 Hz
        assert any("target-only" in s.message for m in diags for s in m.status)
        gen.destroy()
    finally:
        node.stop()
        client_node.destroy_subscription(sub)


def test_hanging_load_times_out_and_decoding_continues(client_node, params_file) -> None:
    """Storage so slow that a load would take hours: generation goes on, the load times out."""
    node, _ = _start_active(
        client_node, params_file,
        {"storage_bandwidth_mbps": 0.001, "load_timeout_s": 1.0, "budget_drafts": 2},
        timeout_s=240,
    )
    try:
        gen = GenerateClient(client_node)
        assert gen.wait_for_server(30.0)
        before_goal = len(node.log())  # configure's warm-up loads time out too: look only past them
        call = gen.generate(make_goal(LEGAL_PROMPT, 48, domain_hint="legal"), timeout_s=120)
        assert call.succeeded
        assert call.result.stall_seconds == 0.0
        assert "draft-legal" not in call.result.drafts_used
        deadline = time.monotonic() + 30
        while not re.search(r"draft-legal.*timed out", node.log()[before_goal:]) and time.monotonic() < deadline:
            time.sleep(0.1)  # the loader reports the timeout asynchronously
        assert re.search(r"draft-legal.*timed out", node.log()[before_goal:]), node.log()
        gen.destroy()
    finally:
        node.stop()


# ---------------------------------------------------------------------- abuse, load and lifetime
def test_abusive_input_burst_and_cancel_storm(client_node, params_file) -> None:
    rejections: list[String] = []
    sub = client_node.create_subscription(String, "/memspec/goal_rejections", rejections.append, REJECTIONS_QOS)
    node, _ = _start_active(client_node, params_file, {"busy_policy": "queue", "max_queue": 4})
    try:
        gen = GenerateClient(client_node)
        assert gen.wait_for_server(30.0)
        gen.generate(make_goal(ROBOT_PROMPT, 8), timeout_s=120)  # warm
        before_kb, _ = node.rss_kb_and_threads()
        bad = [
            make_goal("x" * 12_000, 8),
            make_goal("escape \x1b[2J", 8),
            make_goal(ROBOT_PROMPT, 2**31),
            make_goal(ROBOT_PROMPT, 8, temperature=float("nan")),
            make_goal(ROBOT_PROMPT, 8, temperature=-0.5),
            make_goal(ROBOT_PROMPT, 8, top_p=float("inf")),
        ]
        assert not any(gen.send(g).wait_accepted() for g in bad)
        # A burst of 100 goals behind one that is running: exactly max_queue are queued, the
        # rest are rejected with a reason. The running goal's prompt generates LONG_TOKENS
        # without an end-of-sequence (test_generate.py checks it), so nothing leaves the
        # queue during the burst.
        running = gen.send(make_goal(LEGAL_PROMPT, LONG_TOKENS))
        assert running.wait_accepted()
        deadline = time.monotonic() + 60
        while not running.feedback and time.monotonic() < deadline:
            assert running.result is None, running.result
            time.sleep(0.01)  # until it streams: running, not queued
        assert running.feedback, "the blocking goal never streamed"
        calls = [gen.send(make_goal(ROBOT_PROMPT, 16)) for _ in range(100)]
        accepted = [c for c in calls if c.wait_accepted()]
        assert running.result is None, "the running goal ended during the burst: the queue bound is not tested"
        assert len(accepted) == 4, len(accepted)
        # Cancel storm: cancel everything accepted, repeatedly.
        for _ in range(3):
            for c in [running, *accepted]:
                c.cancel()
        for c in [running, *accepted]:
            c.wait(120)
        assert node.alive()
        assert gen.generate(make_goal(ROBOT_PROMPT, 8), timeout_s=120).succeeded
        after_kb, _ = node.rss_kb_and_threads()
        assert after_kb < before_kb + 100_000, (before_kb, after_kb)  # < 100 MB growth
        deadline = time.monotonic() + 30
        while len(rejections) < 6 + 96 and time.monotonic() < deadline:
            time.sleep(0.05)  # rejections arrive on the client's executor thread
        assert len(rejections) == 6 + 96, [r.data for r in rejections]
        assert sum("busy" in r.data for r in rejections) == 96
        gen.destroy()
    finally:
        node.stop()
        client_node.destroy_subscription(sub)

