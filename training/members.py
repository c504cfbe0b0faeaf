"""The zoo's target: three training phases, each an fp32 checkpoint under ``.cache/zoo``."""
from __future__ import annotations

import numpy as np
import torch
from transformers import LlamaForCausalLM

from memspec_ros.builder.training_loop import TrainSpec, train
from training.data import WindowSampler, token_stream
from training.model_configs import TARGET, Shape, llama_config
from training.paths import CHECKPOINT_DIR
from training.recipes import (
    TARGET_BATCH,
    TARGET_EXTEND_LR,
    TARGET_EXTEND_STEPS,
    TARGET_LR,
    TARGET_MIX,
    TARGET_POLISH_CYCLES,
    TARGET_POLISH_MIX,
    TARGET_SECONDS,
    TARGET_SEQ,
    UNLIKELIHOOD_BATCH,
)
from training.tokenizer import load_tokenizer

SEED = 20240
POLISH_CHECKPOINTS: tuple[str, ...] = tuple(
    "target-polished" if i == 0 else f"target-polished-{i + 1}"
    for i in range(len(TARGET_POLISH_CYCLES)))
"""One checkpoint per unlikelihood cycle of phase three."""
TARGET_CHECKPOINT = POLISH_CHECKPOINTS[-1]
"""The checkpoint the zoo's target is exported from."""


def _new_model(shape: Shape, seed: int) -> LlamaForCausalLM:
    tok = load_tokenizer()
    torch.manual_seed(seed)
    return LlamaForCausalLM(llama_config(shape, tok.bos_token_id, tok.eos_token_id,
                                         tok.pad_token_id))


def _sampler(mix: dict[str, float], seq_len: int, batch: int, seed: int,
             extra: bool = False) -> WindowSampler:
    """Windows from the domains' train splits; ``extra`` adds the train-only extra code
    (only the stages after it was introduced use it, so a rebuild reproduces the others)."""
    tok = load_tokenizer()
    streams = {d: token_stream(d, tok) for d in mix}
    if extra and "code" in streams:
        streams["code"] = np.concatenate([streams["code"], token_stream("code", tok, "extra")])
    return WindowSampler(streams, mix, seq_len, batch, seed)


def train_target() -> dict[str, float]:
    """Train the target on the weighted mix of all domains."""
    model = _new_model(TARGET, SEED)
    spec = TrainSpec(TARGET_SECONDS, TARGET_LR, TARGET_BATCH, TARGET_SEQ, SEED)
    return train(model, _sampler(TARGET_MIX, TARGET_SEQ, TARGET_BATCH, SEED), spec,
                 CHECKPOINT_DIR / "target", "target")


def extend_target() -> dict[str, float]:
    """Continue the phase-one target for a step budget (warm restart, new data order)."""
    model = LlamaForCausalLM.from_pretrained(CHECKPOINT_DIR / "target", dtype=torch.float32)
    seed = SEED + 50
    spec = TrainSpec(0.0, TARGET_EXTEND_LR, TARGET_BATCH, TARGET_SEQ, seed,
                     steps=TARGET_EXTEND_STEPS, save_every=250)
    return train(model, _sampler(TARGET_MIX, TARGET_SEQ, TARGET_BATCH, seed), spec,
                 CHECKPOINT_DIR / "target-extended", "target-extend")


def polish_target(force: bool = False) -> list[dict[str, float]]:
    """Third phase: cycles of next-token steps (with the extra code) alternating with
    sequence-level unlikelihood steps against greedy loops (``training/unlikelihood.py``).
    A finished cycle (its ``train_stats.json`` exists) is skipped unless ``force``."""
    from training.unlikelihood import PREFIX_TOKENS, UnlikelihoodObjective
    tok = load_tokenizer()
    stats, source = [], "target-extended"
    for i, ((steps, lr, loop_mix), name) in enumerate(zip(TARGET_POLISH_CYCLES, POLISH_CHECKPOINTS,
                                                 strict=True)):
        out = CHECKPOINT_DIR / name
        if force or not (out / "train_stats.json").exists():
            model = LlamaForCausalLM.from_pretrained(CHECKPOINT_DIR / source, dtype=torch.float32)
            seed = SEED + 70 + 10 * i
            data = _sampler(TARGET_POLISH_MIX, TARGET_SEQ, TARGET_BATCH, seed, extra=True)
            prefixes = _sampler(loop_mix, PREFIX_TOKENS - 1, UNLIKELIHOOD_BATCH, seed + 1,
                                extra=True)
            spec = TrainSpec(0.0, lr, TARGET_BATCH, TARGET_SEQ, seed, steps=steps,
                             save_every=200)
            objective = UnlikelihoodObjective(data, prefixes, tok.eos_token_id)
            stats.append(train(model, objective, spec, out, f"target-polish-{i + 1}"))
        source = name
    return stats
