"""Recipes that turn shapes + data + budgets into trained zoo members (fp32 checkpoints)."""
from __future__ import annotations

import numpy as np
import torch
from transformers import LlamaForCausalLM

from training.data import WindowSampler, token_stream
from training.model_configs import DRAFTS, TARGET, Shape, llama_config
from training.paths import CHECKPOINT_DIR, DOMAINS
from training.recipes import (
    DRAFT_BATCH,
    DRAFT_LR,
    DRAFT_SECONDS,
    DRAFT_SEQ,
    GENERAL_SECONDS,
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
    draft_mix,
)
from training.tokenizer import load_tokenizer
from training.train import TrainSpec, train

DRAFT_NAMES: tuple[str, ...] = tuple(DRAFTS)
DISTILLED_NAMES: tuple[str, ...] = tuple(n for n in DRAFT_NAMES if n != "general")
SEED = 20240
POLISH_CHECKPOINTS: tuple[str, ...] = tuple(
    "target-polished" if i == 0 else f"target-polished-{i + 1}"
    for i in range(len(TARGET_POLISH_CYCLES)))
"""One checkpoint per unlikelihood cycle of phase three."""
TARGET_CHECKPOINT = POLISH_CHECKPOINTS[-1]
"""The checkpoint the zoo's target is exported from and the drafts are distilled toward."""


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


def train_draft(name: str) -> dict[str, float]:
    """Train draft ``name`` from scratch on its own domain (or the uniform mix)."""
    seed = SEED + 1 + list(DRAFT_NAMES).index(name)
    model = _new_model(DRAFTS[name], seed)
    seconds = GENERAL_SECONDS if name == "general" else DRAFT_SECONDS
    spec = TrainSpec(seconds, DRAFT_LR, DRAFT_BATCH, DRAFT_SEQ, seed, log_every=100)
    return train(model, _sampler(draft_mix(name), DRAFT_SEQ, DRAFT_BATCH, seed), spec,
                 CHECKPOINT_DIR / f"draft-{name}", f"draft-{name}")


def distill_draft(name: str) -> dict[str, float]:
    """Fine-tune a trained draft toward the target's distribution: first on its own corpus
    data, then on the target's greedy continuations of prefixes of that data."""
    from training.distill import distill
    from training.recipes import (
        CONTINUATION_BATCHES,
        CONTINUATION_GENERATION_BATCH,
        CONTINUATION_NEW_TOKENS,
        CONTINUATION_PREFIX,
        CONTINUATION_SECONDS,
        DISTILL_BATCH,
        DISTILL_LR,
        DISTILL_SECONDS,
        DISTILL_SEQ,
    )
    from training.target_continuations import ContinuationPool
    seed = SEED + 100 + list(DRAFT_NAMES).index(name)
    student = LlamaForCausalLM.from_pretrained(CHECKPOINT_DIR / f"draft-{name}",
                                               dtype=torch.float32)
    teacher = LlamaForCausalLM.from_pretrained(CHECKPOINT_DIR / TARGET_CHECKPOINT,
                                               dtype=torch.float32)
    mix = draft_mix(name) if name != "general" else {d: 1.0 for d in DOMAINS}
    spec = TrainSpec(DISTILL_SECONDS, DISTILL_LR, DISTILL_BATCH, DISTILL_SEQ, seed, log_every=50)
    data = _sampler(mix, DISTILL_SEQ, DISTILL_BATCH, seed, extra=True)
    distill(student, teacher, data, spec, CHECKPOINT_DIR / f"distilled-{name}-corpus",
            f"distill-{name}")
    prefixes = _sampler(mix, CONTINUATION_PREFIX - 1, CONTINUATION_GENERATION_BATCH, seed + 1,
                        extra=True)
    pool = ContinuationPool(teacher, prefixes, CONTINUATION_BATCHES, CONTINUATION_NEW_TOKENS,
                            DISTILL_BATCH, seed + 2)
    spec = TrainSpec(CONTINUATION_SECONDS, DISTILL_LR, DISTILL_BATCH, DISTILL_SEQ, seed + 3,
                     log_every=50)
    return distill(student, teacher, pool, spec, CHECKPOINT_DIR / f"distilled-{name}",
                   f"distill-{name}-continuations")
