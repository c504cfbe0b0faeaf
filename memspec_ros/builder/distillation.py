"""Distillation fine-tuning of a trained draft toward the target's next-token distribution.

Used by ``memspec_build drafts``, which also builds the bundled zoo's drafts (``make zoo``).

Why: greedy acceptance only counts agreement with the *target's* argmax, not with the corpus.
A draft trained on the corpus alone wastes capacity on tokens the target would never pick;
a short KL fine-tune on the draft's own domain (the target as teacher) measurably raises
acceptance. Starting from a pretrained draft matters: the teacher forward makes each step
~4x slower, so distilling from scratch in the same time is worse.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Protocol

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from memspec_ros.builder.cpu_autocast import training_autocast
from memspec_ros.builder.progress import advance_to, budget_bar
from memspec_ros.builder.schedule import lr_at
from memspec_ros.builder.training_loop import TrainSpec, make_optimizer
from memspec_ros.builder.validation import BestWeights, Check
from memspec_ros.core.token_map import TokenMap, draft_inputs


class BatchSource(Protocol):
    """Anything that hands out ``(batch, seq_len + 1)`` token batches: corpus windows
    (:class:`memspec_ros.builder.windows.WindowSampler`) or the target's continuations
    (:class:`memspec_ros.builder.continuations.ContinuationPool`)."""

    def next(self) -> torch.Tensor: ...


def kl_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Forward KL(teacher || student), averaged over positions (temperature 1)."""
    s = F.log_softmax(student_logits.float(), dim=-1).flatten(0, 1)
    t = F.log_softmax(teacher_logits.float(), dim=-1).flatten(0, 1)
    return F.kl_div(s, t, log_target=True, reduction="batchmean")


def distill(student: PreTrainedModel, teacher: PreTrainedModel, sampler: BatchSource,
            spec: TrainSpec, out_dir: Path, name: str, *, check: Check | None = None,
            checks: int = 10, token_map: TokenMap | None = None) -> dict[str, float]:
    """Run KL distillation for ``spec.seconds``, save the student, return summary stats.

    With ``check``, the student is scored before the first step, every ``1/checks`` of the
    budget and at the end, and the best-scoring weights are the ones saved
    (:mod:`memspec_ros.builder.validation` says why); without it, the last weights are.
    With ``token_map`` the student is a subset draft: it reads the batch in its own ids and
    learns the target's distribution over the subset plus the mass of every other token.
    """
    torch.manual_seed(spec.seed)
    teacher.eval()
    student.train()
    opt = make_optimizer(student, spec.peak_lr)
    best = BestWeights(check) if check is not None else None
    bar = budget_bar(spec.seconds, name)
    t0 = time.time()
    step, ema, last_step_s = 0, None, 0.0
    next_check = 0.0
    while spec.another_step_fits(step, elapsed := time.time() - t0, last_step_s):
        if best is not None and elapsed >= next_check:
            best.offer(student, elapsed)
            next_check = elapsed + spec.seconds / max(1, checks)
        step_start = time.time()  # after the check: a step's length excludes the occasional check
        lr = lr_at(elapsed / spec.seconds, spec.peak_lr, warmup=0.05)
        for g in opt.param_groups:
            g["lr"] = lr
        inputs = sampler.next()[:, :-1]
        with training_autocast():
            with torch.inference_mode():
                teacher_logits = teacher(input_ids=inputs).logits.float()
                if token_map is not None:
                    teacher_logits = token_map.teacher_log_probs(teacher_logits)
            loss = kl_loss(student(input_ids=draft_inputs(inputs, token_map)).logits, teacher_logits.clone())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        step += 1
        last_step_s = time.time() - step_start
        ema = loss.item() if ema is None else 0.9 * ema + 0.1 * loss.item()
        advance_to(bar, time.time() - t0)
        bar.set_postfix_str(f"kl {ema:.3f}", refresh=False)
        if step % spec.log_every == 0:
            print(f"[{name}] step {step} t={elapsed:.0f}s kl={ema:.3f}", flush=True)
    bar.close()
    validation: dict[str, float] = {}
    if best is not None:
        best.offer(student, time.time() - t0)
        best.restore(student)
        validation = best.summary()
        print(f"[{name}] validation agreement {validation['validation_start']:.3f} at the start, "
              f"{validation['validation_end']:.3f} at the end: keeping the best, "
              f"{validation['validation_best']:.3f} at {validation['validation_best_at_s']:.0f} s", flush=True)
    student.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    student.save_pretrained(out_dir, safe_serialization=True)
    stats = {"steps": step, "seconds": time.time() - t0, "kl_ema": ema or 0.0, **validation}
    (out_dir / "train_stats.json").write_text(json.dumps(stats) + "\n")
    print(f"[{name}] done {stats}", flush=True)
    return stats
