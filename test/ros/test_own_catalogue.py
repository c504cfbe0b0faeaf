"""The node serves a catalogue a user built with ``memspec_build``, over DDS, losslessly.

Why: the promise of the build tool is "your target and your text in, a catalogue the node
serves out". The builder's own tests apply the node's checks in-process; this one closes the
loop the way a robot team would: a tiny Qwen2 target with its own byte-level BPE tokenizer
(not the zoo's Llama, not its tokenizer) goes through ``memspec_build drafts`` and
``predictor``, then the real node process is pointed at the result (``catalogue`` parameter),
configured and activated through the lifecycle services, and sent plain greedy goals. Every
result must be the target's own greedy output: the same tokens (``num_tokens``) and the same
text, computed here with transformers' ``generate`` on the same target and decoded the way the
node decodes (``skip_special_tokens``, no clean-up of spaces). One node start for the module.
The drafts are subset drafts (``--draft-vocab``): each predicts 64 of the target's 384 tokens,
so the node translates ids both ways and the target alone writes the others.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from rclpy.node import Node

from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test"))  # ``builder.tiny_catalogue``

from builder.tiny_catalogue import SUBSET_VOCAB, Built, build_tiny_catalogue  # noqa: E402

MAX_NEW_TOKENS = 24
PROMPTS = (
    "USER: bring the red cup from the lab\nROBOT:",
    "def add_3(x, y):\n",
    "Solve 4*x + 2 = 14.\n",
)
"""One plain prompt per domain of the tiny corpora (robot, code, math)."""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    # subset drafts (--draft-vocab): the full-vocabulary path is served by every zoo test
    return build_tiny_catalogue(tmp_path_factory.mktemp("user"), evaluate=False, draft_vocab=SUBSET_VOCAB)


def _target_greedy(built: Built) -> list[tuple[str, int, str]]:
    """``(prompt, tokens, text)`` of the built target's own greedy output for each prompt."""
    import torch

    from memspec_ros.core.engine import SpeculativeEngine
    from memspec_ros.core.model_loading import load_causal_lm, load_config, load_tokenizer
    from memspec_ros.runtime.catalogue_file import load_catalogue_file

    torch.set_num_threads(1)  # the node decodes beside this process on a shared machine
    target = load_catalogue_file(built.out).target
    assert load_config(target).model_type == "qwen2"  # not the zoo's Llama
    engine = SpeculativeEngine(load_causal_lm(target), load_tokenizer(target))
    out = []
    for prompt in PROMPTS:
        ids = engine.target_greedy(prompt, MAX_NEW_TOKENS)
        text = engine.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        out.append((prompt, len(ids), text))
    return out


def test_node_serves_a_built_catalogue_losslessly(client_node: Node, params_file: Path, built: Built) -> None:
    expected = _target_greedy(built)
    catalogue = built.out / "catalogue.yaml"
    assert all((built.out / f"draft-{d}" / "token_map.safetensors").is_file() for d in ("robot", "general"))
    with NodeProcess(params_file, overrides={"catalogue": str(catalogue), "num_threads": 1}) as node:
        lifecycle = LifecycleClient(client_node)
        assert lifecycle.wait_for_services(60.0), node.log()
        assert lifecycle.get_state() == "unconfigured"
        assert lifecycle.change_state("configure"), node.log()
        assert lifecycle.change_state("activate"), node.log()
        gen = GenerateClient(client_node)
        drafted: set[str] = set()
        try:
            assert gen.wait_for_server(30.0), node.log()
            for prompt, tokens, text in expected:
                call = gen.generate(make_goal(prompt, MAX_NEW_TOKENS), timeout_s=120)
                assert call.succeeded, (prompt, call.result, node.log())
                assert call.result.num_tokens == tokens, prompt
                assert call.result.text == text, prompt
                assert call.streamed_text == call.result.text
                drafted |= set(call.result.drafts_used)
        finally:
            gen.destroy()
        log = node.log()
    assert f"catalogue={catalogue.resolve()}" in log, log  # configure names what it serves
    assert drafted, "no goal was drafted by a (subset) draft"
