"""Chat corpora: conversations rendered with the target's chat template, prompts that end where an
answer begins, and the predictor's and benchmark's dialogues sent as chat turns.

Why: an instruct target is served chat goals, which the node renders with the target's chat
template. Drafts trained on raw text never see the template's markers or where an answer ends,
and prompts cut from the middle of a rendering make the target continue in the middle of a
turn, which no robot's client ever asks for. A tiny ChatML target built here goes through the
three subcommands as a user would.
"""
from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from memspec_ros.builder.cli import main

from .tiny_catalogue import DRAFTS_TINY, EVALUATE_TINY, PREDICTOR_TINY

CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
SYSTEM = "You are a helpful robot."


def _conversations(domain: str, rng: random.Random) -> list[list[dict]]:
    out = []
    for _ in range(30):
        if domain == "robot":
            place = rng.choice(["kitchen", "hall", "lab", "garden"])
            q, a = f"go to the {place}", f"Okay. Going to the {place} now."
        else:
            x, y = rng.randint(2, 9), rng.randint(2, 9)
            q, a = f"what is {x} times {y}?", f"{x} times {y} is {x * y}."
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q},
                {"role": "assistant", "content": a}]
        if rng.random() < 0.3:
            msgs += [{"role": "user", "content": "and again?"}, {"role": "assistant", "content": a}]
        out.append(msgs)
    return out


def _write_chat_target(folder: Path, texts: list[str]) -> Path:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<pad>",
                                   clean_up_tokenization_spaces=False)
    fast.chat_template = CHATML
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def chat_build(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("chat")
    rng = random.Random(3)
    corpora = {d: _conversations(d, rng) for d in ("robot", "math")}
    texts = [m["content"] for convs in corpora.values() for c in convs for m in c]
    target = _write_chat_target(root / "chat-target", texts)
    args = []
    for domain, convs in corpora.items():
        path = root / f"{domain}.jsonl"
        path.write_text("".join(json.dumps({"messages": c}) + "\n" for c in convs))
        args += ["--corpus", f"{domain}={path}"]
    out = root / "built"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["drafts", "--target", str(target), *args, "--out", str(out), *DRAFTS_TINY]) == 0, buf.getvalue()
        assert main(["predictor", "--out", str(out), *PREDICTOR_TINY]) == 0
        assert main(["evaluate", "--out", str(out), *EVALUATE_TINY]) == 0
    return out


def test_held_out_prompts_end_where_an_answer_begins(chat_build: Path) -> None:
    from memspec_ros.core.model_loading import load_tokenizer

    tok = load_tokenizer(chat_build / "target")
    rows = [json.loads(line) for line in (chat_build / "heldout" / "prompts.jsonl").open()]
    assert rows and all("messages" in r for r in rows)
    for row in rows:
        messages = [{"role": r, "content": c} for r, c in row["messages"]]
        assert messages[-1]["role"] == "user" and messages[0]["content"] == SYSTEM
        assert row["prompt"] == tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert row["prompt"].endswith("<|im_start|>assistant\n")
    held = [json.loads(line) for line in (chat_build / "heldout" / "robot.jsonl").open()]
    assert all(h["text"].endswith("<|im_end|>\n") and "messages" in h for h in held), "documents are renderings"


def test_predictor_and_benchmark_dialogues_are_chat_turns(chat_build: Path) -> None:
    from bench.workloads import build_workload
    from memspec_ros.runtime.workload import load_chat_style, load_prompts

    report = json.loads((chat_build / "reports" / "predictor.json").read_text())
    assert report["training_dialogues"] >= 2
    prompts_file = chat_build / "heldout" / "prompts.jsonl"
    style = load_chat_style(prompts_file)
    assert style.chat and style.system_prompt == SYSTEM
    prompts = load_prompts(prompts_file)
    assert all(not p.startswith("<|im_start|>") for ps in prompts.values() for p in ps), "user messages, not renderings"
    workload = build_workload(prompts, sessions=1, turns=1, max_new_tokens=8, calibration_turns=0, style=style)
    turn = workload.sessions[0].turns[0]
    assert turn.chat and turn.system_prompt == SYSTEM


def test_chat_turns_are_recorded_as_the_node_renders_them(chat_build: Path) -> None:
    """A trace of chat turns holds the tokens the runtime prefills for chat goals, appended turn by turn."""
    from memspec_ros.core.engine import SpeculativeEngine
    from memspec_ros.core.model_loading import load_causal_lm, load_tokenizer
    from memspec_ros.runtime.traces import Turn, record_dialogue

    tok = load_tokenizer(chat_build / "target")
    engine = SpeculativeEngine(load_causal_lm(chat_build / "target"), tok)
    turns = [Turn("go to the lab", 6, "robot", chat=True, system_prompt=SYSTEM),
             Turn("what is 3 times 4?", 6, "math", chat=True, system_prompt=SYSTEM)]
    trace = record_dialogue(engine, {}, turns, keep_hidden=False)
    first = tok.apply_chat_template([{"role": "system", "content": SYSTEM},
                                     {"role": "user", "content": "go to the lab"}],
                                    tokenize=False, add_generation_prompt=True)
    assert trace.turns[0].prompt_ids == tok(first, add_special_tokens=False)["input_ids"]
    second = tok.decode(trace.turns[1].prompt_ids)
    assert second.endswith("<|im_start|>user\nwhat is 3 times 4?<|im_end|>\n<|im_start|>assistant\n"), second
    assert "<|im_start|>system" not in second, "the system prompt is rendered once per conversation"


def test_a_conversation_line_is_checked_and_needs_a_template(tmp_path: Path) -> None:
    from .user_inputs import write_target

    target = write_target(tmp_path / "no-template")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "robot", "content": "hi"}]}) + "\n")
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"q{i}"},
                                                     {"role": "assistant", "content": f"a{i}"}]}) + "\n"
                            for i in range(5)))
    err = io.StringIO()
    for corpus, expected in ((bad, "message 0 must be"), (good, "no chat template")):
        with contextlib.redirect_stderr(err):
            code = main(["drafts", "--target", str(target), "--corpus", f"robot={corpus}", "--corpus",
                         f"math={good}", "--out", str(tmp_path / "out"), *DRAFTS_TINY])
        assert code == 2 and expected in err.getvalue(), err.getvalue()
