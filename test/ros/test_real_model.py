"""The default model set, served as shipped: SmolLM2-135M-Instruct with its drafts, over real DDS.

Everything else in the suite runs on the 17 M zoo (fast); this is the one test of what a robot
team gets when it switches the node on: the shipped params file (default catalogue, ``dtype:
auto``, ``num_threads: 0``), a chat goal, and the answer checked against transformers' own greedy
``generate()`` of the same target in the dtype the node chose (its log says which): token for
token, or in bfloat16 up to a tie (the first difference is where the target rates both tokens
within a tie of each other: :mod:`memspec_ros.core.greedy_ties`).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from memspec_ros.bundled_models import default_model_set_root
from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess

SHIPPED_PARAMS = Path(__file__).resolve().parents[2] / "config" / "memspec.yaml"
SYSTEM = "You are a helpful home service robot. Keep your answers short and clear."
QUESTIONS = ("What is the capital of France?", "Write a Python function that reverses a list.")


def _check_against_reference(dtype: torch.dtype, messages: list[dict], answer: str, max_new_tokens: int) -> None:
    """The node's ``answer`` is transformers' greedy answer, or departs from it only at a tie."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from memspec_ros.core.greedy_ties import divergence

    target = default_model_set_root() / "target"
    tok = AutoTokenizer.from_pretrained(target)
    model = AutoModelForCausalLM.from_pretrained(target, dtype=dtype).eval()
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False)
    reference = out[0, ids["input_ids"].shape[1]:].tolist()
    expected = tok.decode(reference, skip_special_tokens=True)
    if answer == expected:
        return
    ours = tok(answer, add_special_tokens=False)["input_ids"]
    found = divergence(model, ids["input_ids"][0].tolist(), reference, ours)
    assert found is not None and found.is_tie, (answer, expected, found)


def test_the_shipped_configuration_serves_the_real_model_losslessly(client_node) -> None:
    torch.set_num_threads(1)  # the node decodes beside this process on two cores
    with NodeProcess(SHIPPED_PARAMS, overrides={"session_dir": ""}) as node:
        lc = LifecycleClient(client_node)
        assert lc.wait_for_services(300.0), node.log()
        assert lc.change_state("configure", timeout_s=600.0), node.log()
        log = node.log()
        assert f"catalogue={default_model_set_root().resolve() / 'catalogue.yaml'}" in log, log
        chosen = re.search(r"dtype auto: (\w+) \(median target step", log)
        assert chosen, log
        dtype = getattr(torch, chosen.group(1))
        assert lc.change_state("activate"), node.log()
        gen = GenerateClient(client_node)
        assert gen.wait_for_server(60.0), node.log()
        messages = [{"role": "system", "content": SYSTEM}]
        for i, question in enumerate(QUESTIONS):
            call = gen.generate(make_goal(messages=[("user", question)], system_prompt=SYSTEM if i == 0 else "",
                                          max_new_tokens=32, session_id="real"), timeout_s=300)
            assert call.succeeded, (call.result, node.log())
            messages.append({"role": "user", "content": question})
            _check_against_reference(dtype, messages, call.result.text, 32)
            messages.append({"role": "assistant", "content": call.result.text})
        gen.destroy()
