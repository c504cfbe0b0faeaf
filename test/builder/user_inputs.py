"""What a robot team brings to ``memspec_build``, in miniature: a non-Llama target and corpora.

The target is a randomly initialised Qwen2 (not Llama: the drafts must be Llama-style whatever
the target is) with its own byte-level BPE tokenizer trained here on the corpora, and a logit
width padded beyond the tokenizer's length (as Qwen's real checkpoints are), so a draft that
copied ``len(tokenizer)`` instead of the target's logit width would fail the node's checks.
Three domains in the three accepted corpus forms: JSON lines, a .txt file of blank-line
separated documents, a folder of .txt files. Everything takes well under a second to build.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

PLACES = ["kitchen", "hall", "lab", "dock", "office", "garden", "garage", "bay 3"]
THINGS = ["red cup", "blue box", "tool kit", "bottle", "book", "charger"]
DOCUMENTS = 30


def robot_documents(rng: random.Random) -> list[str]:
    docs = []
    for _ in range(DOCUMENTS):
        place, thing = rng.choice(PLACES), rng.choice(THINGS)
        docs.append(f"USER: bring the {thing} from the {place}\nROBOT: Fetching the {thing} from the {place}.\n"
                    f"[cmd] navigate_to goal=\"{place}\"\n[cmd] grasp object=\"{thing}\"")
    return docs


def code_documents(rng: random.Random) -> list[str]:
    docs = []
    for i in range(DOCUMENTS):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        docs.append(f"def add_{i}(x, y):\n    total = x + y * {a}\n    return total - {b}\n"
                    f"print(add_{i}({a}, {b}))")
    return docs


def math_documents(rng: random.Random) -> list[str]:
    docs = []
    for _ in range(DOCUMENTS):
        a, b = rng.randint(2, 9), rng.randint(1, 20)
        docs.append(f"Solve {a}*x + {b} = {a * 3 + b}.\nSubtract {b}: {a}*x = {a * 3}.\nDivide by {a}: x = 3.")
    return docs


def write_corpora(root: Path) -> dict[str, Path]:
    """``{domain: path}``: robot as .jsonl, code as one .txt, math as a folder of .txt files."""
    rng = random.Random(7)
    root.mkdir(parents=True, exist_ok=True)
    robot = root / "robot.jsonl"
    robot.write_text("".join(json.dumps({"text": d}) + "\n" for d in robot_documents(rng)))
    code = root / "code.txt"
    code.write_text("\n\n".join(code_documents(rng)) + "\n")
    math = root / "math"
    math.mkdir(exist_ok=True)
    for i, doc in enumerate(math_documents(rng)):
        (math / f"problem{i:02d}.txt").write_text(doc)
    return {"robot": robot, "code": code, "math": math}


def all_text() -> list[str]:
    rng = random.Random(7)
    return robot_documents(rng) + code_documents(rng) + math_documents(rng)


def write_target(folder: Path, *, seed: int = 0) -> Path:
    """A tiny random Qwen2 causal LM with its own tokenizer, saved as a Hugging Face folder."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=360, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(all_text(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   clean_up_tokenization_spaces=False)
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(fast) + 24, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         tie_word_embeddings=False, bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id)
    Qwen2ForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    return folder
