"""A tiny zoo of random Llama models sharing one tokenizer, for fast runtime tests.

Real models are not needed to test the runtime's mechanics (budget invariant, stalls, lossless
output, failure handling, determinism), only models that load through the same public code.
Building this zoo takes about a second. ``draft-copy`` is an exact copy of the target (full
acceptance) and ``draft-noisy`` a perturbed copy (partial acceptance), so policies have
something to find; the small random drafts (different sizes) are almost never accepted.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from memspec_ros.runtime.traces import Turn

TEXT = [
    "robot move to the kitchen and pick up the red cup please",
    "def add(a, b):\n    return a + b\n\nprint(add(1, 2))",
    "solve x**2 - 4 = 0 ; x = 2 or x = -2 ; derivative of x**3 is 3*x**2",
    "permission is hereby granted, free of charge, to any person obtaining a copy",
    "the quick brown fox jumps over the lazy dog while the cat sleeps",
] * 4

DIALOGUE = [Turn("robot move to the", 20, "robot"), Turn("def add(a, b):", 20, "code"),
            Turn("solve x**2 - 4 = 0", 20, "math")]
"""A three-turn conversation that shifts topic every turn."""

DRAFT_SHAPES = {"draft-robot": 24, "draft-code": 32, "draft-math": 40, "draft-general": 48}


def build_tokenizer(out: Path) -> PreTrainedTokenizerFast:
    """Train a small byte-level BPE and save it as a Hugging Face fast tokenizer."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT, trainer)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(out)
    return fast


def _config(tok: PreTrainedTokenizerFast, hidden: int, layers: int) -> LlamaConfig:
    return LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                       num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                       max_position_embeddings=512, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=False)


def build_tiny_zoo(root: Path, seed: int = 0) -> dict[str, Path]:
    """Write ``target`` and the drafts under ``root``; return ``{name: dir}``."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    root.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(root / "tokenizer")
    dirs: dict[str, Path] = {}
    torch.manual_seed(seed)
    target = LlamaForCausalLM(_config(tok, 64, 2))
    dirs["target"] = root / "target"
    target.save_pretrained(dirs["target"], safe_serialization=True)
    tok.save_pretrained(dirs["target"])
    for i, (name, hidden) in enumerate(DRAFT_SHAPES.items()):
        torch.manual_seed(seed + 1 + i)
        model = LlamaForCausalLM(_config(tok, hidden, 1))
        dirs[name] = root / name
        model.save_pretrained(dirs[name], safe_serialization=True)
        tok.save_pretrained(dirs[name])
    # An exact copy of the target (full acceptance) and a perturbed one (partial acceptance).
    dirs["draft-copy"] = root / "draft-copy"
    target.save_pretrained(dirs["draft-copy"], safe_serialization=True)
    tok.save_pretrained(dirs["draft-copy"])
    noisy = LlamaForCausalLM(_config(tok, 64, 2))
    noisy.load_state_dict(target.state_dict())
    gen = torch.Generator().manual_seed(seed + 99)
    with torch.no_grad():
        for p in noisy.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * p.std() * 0.6)
    dirs["draft-noisy"] = root / "draft-noisy"
    noisy.save_pretrained(dirs["draft-noisy"], safe_serialization=True)
    tok.save_pretrained(dirs["draft-noisy"])
    return dirs
