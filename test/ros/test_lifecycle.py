"""The node's lifecycle, driven from this (separate) process over real DDS."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from memspec_interfaces.msg import DraftResidency

from memspec_ros.bundled_models import bundled_zoo_root
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess
from memspec_ros.ros.qos import RESIDENCY_LOG_QOS

SHIPPED_PARAMS = Path(__file__).resolve().parents[2] / "config" / "memspec.yaml"


def test_full_lifecycle_across_processes(client_node) -> None:
    residency: list[DraftResidency] = []
    sub = client_node.create_subscription(DraftResidency, "/memspec/draft_residency", residency.append,
                                          RESIDENCY_LOG_QOS)
    # as shipped (num_threads and dtype auto) but for the catalogue: the fast zoo for six transitions
    # (test_real_model serves the shipped default catalogue)
    with NodeProcess(SHIPPED_PARAMS, overrides={"residency_period_s": 0.2, "catalogue": str(bundled_zoo_root()),
                                                "session_dir": ""}) as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_services(60.0), node.log()
        assert lc.get_state() == "unconfigured"
        # Lifecycle publishers: configured but inactive, the node publishes no residency even
        # though its timer runs (every 0.2 s); activated, it publishes at once.
        assert lc.change_state("configure"), node.log()
        assert re.search(r"num_threads auto: \d+ torch thread\(s\) \(median speculative round: 1 -> ", node.log()), \
            node.log()
        assert re.search(r"dtype auto: (float32|bfloat16) \(median target step", node.log()), node.log()
        # the zoo's evaluation predates the rounds by k: k keeps 4 and says why; the interval is timed
        assert "k auto: 4 (" in node.log() and "rerun" in node.log(), node.log()
        assert re.search(r"check_interval auto: \d+ \(a scheduling decision [\d.]+ ms", node.log()), node.log()
        time.sleep(1.0)  # five periods of the residency timer
        assert residency == [], "an inactive node published draft_residency"
        assert lc.change_state("activate"), node.log()
        deadline = time.monotonic() + 30
        while not residency and time.monotonic() < deadline:
            time.sleep(0.05)  # the subscription is served by the client's executor thread
        assert residency, "the active node published no draft_residency"
        assert lc.change_state("deactivate") and lc.change_state("cleanup"), node.log()
        for transition, expected in [
            ("configure", "inactive"),
            ("activate", "active"),
            ("deactivate", "inactive"),
            ("cleanup", "unconfigured"),
            ("configure", "inactive"),
            ("cleanup", "unconfigured"),
        ]:
            assert lc.change_state(transition), f"{transition} failed:\n{node.log()}"
            assert lc.get_state() == expected
        assert lc.change_state("shutdown")
        assert lc.get_state() == "finalized"
        assert node.alive()
    client_node.destroy_subscription(sub)


def test_bad_parameter_fails_configure_and_node_stays_unconfigured(client_node, params_file) -> None:
    # Out of range: rclpy refuses it at declaration; the node must not crash.
    with NodeProcess(params_file, overrides={"check_interval": -1}) as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_services(60.0), node.log()
        assert not lc.change_state("configure")
        assert lc.get_state() == "unconfigured"
        assert node.alive()
        assert "check_interval" in node.log()


def test_bad_choice_escaping_path_and_foreign_predictor_are_named(client_node, params_file, zoo_copy) -> None:
    # One fault per configure: with several at once only the first is reported.
    with NodeProcess(params_file, overrides={"policy": "fastest"}) as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_services(60.0), node.log()
        assert not lc.change_state("configure")
        assert lc.get_state() == "unconfigured"
        assert "'policy'" in node.log()
    catalogue = zoo_copy / "catalogue.yaml"
    original = catalogue.read_text()
    catalogue.write_text(original.replace("target: target", "target: ../../etc"))
    with NodeProcess(params_file, overrides={"catalogue": str(zoo_copy)}) as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_services(60.0), node.log()
        assert not lc.change_state("configure")
        assert lc.get_state() == "unconfigured"
        assert "'catalogue'" in node.log() and "outside the catalogue's folder" in node.log(), node.log()
        # Fixed in place, configure is retried: now the predictor does not know a renamed draft.
        catalogue.write_text(original.replace("name: draft-robot", "name: draft-bot"))
        assert not lc.change_state("configure")
        failure = [line for line in node.log().splitlines() if "configure failed" in line][-1]
        assert "predictor" in failure and "'draft-bot'" in failure and "memspec_build predictor" in failure, failure
        # And a target whose Mamba layers keep a recurrent state, which cannot take back rejected tokens.
        catalogue.write_text(original)
        _make_jamba(zoo_copy / "target")
        assert not lc.change_state("configure")
        failure = [line for line in node.log().splitlines() if "configure failed" in line][-1]
        assert "'jamba' model cannot take back rejected draft tokens" in failure and "Mamba" in failure, failure
        assert lc.get_state() == "unconfigured" and node.alive()


def _make_jamba(folder: Path) -> None:
    """Replace the model in ``folder`` (keeping its tokenizer) by a tiny random Jamba of its vocabulary."""
    from transformers import JambaConfig, JambaForCausalLM

    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    (folder / "model.safetensors").unlink()  # hard-linked to the bundled zoo: never written through
    JambaForCausalLM(JambaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, attn_layer_period=2,
                                 attn_layer_offset=1, num_experts=1, mamba_d_state=4)).save_pretrained(folder)


def test_autostart_configures_and_activates(client_node, params_file) -> None:
    with NodeProcess(params_file, overrides={"autostart": True}) as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_services(60.0), node.log()
        deadline = time.monotonic() + 120
        state = lc.get_state()
        while state != "active" and time.monotonic() < deadline:
            time.sleep(0.2)  # polling the node's state while it loads models
            state = lc.get_state()
        assert state == "active", node.log()
