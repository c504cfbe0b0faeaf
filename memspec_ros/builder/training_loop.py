"""Budgeted next-token training of one model (from scratch or from a checkpoint).

Shared by ``memspec_build drafts`` (a user's drafts) and the repository's zoo build
(``training/``), which is why it lives in the installed package. Budgets are wall-clock by
default: the machine is shared and step speed varies, and a build must end when promised;
a run stops at its budget and saves what it has.

bf16 autocast is used on a CPU where it is faster (:mod:`.cpu_autocast`, measured: nearly 2x
with avx512_bf16, 15x slower on an AVX2-only CPU); master weights stay fp32 and so do the
saved weights.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from memspec_ros.builder.cpu_autocast import training_autocast
from memspec_ros.builder.progress import advance_to, budget_bar
from memspec_ros.builder.schedule import lr_at
from memspec_ros.builder.windows import WindowSampler


@dataclass(frozen=True)
class TrainSpec:
    """Budget and optimiser settings of one training run."""

    seconds: float
    peak_lr: float
    batch: int
    seq_len: int
    seed: int
    log_every: int = 25
    steps: int | None = None
    """A step budget replaces the time budget when set: a run on a busy machine then takes
    longer instead of learning less, so the result no longer depends on machine load."""
    save_every: int | None = None
    """Save the weights every N steps (a long run interrupted still leaves usable weights;
    ``train_stats.json`` is only written at the end and marks a finished run)."""

    def progress(self, step: int, elapsed: float) -> float:
        """Fraction of the budget spent, which drives the learning-rate schedule."""
        return step / self.steps if self.steps else elapsed / self.seconds

    def another_step_fits(self, step: int, elapsed: float, last_step_s: float) -> bool:
        """Whether to take one more step: by count, or when one more step as long as the last
        one still ends within the time budget (the first step always runs). Why not just
        ``elapsed < seconds``: with a 150k-token vocabulary a step takes 3-4 s, and a phase
        overran its budget by a whole step."""
        if self.steps:
            return step < self.steps
        return step == 0 or elapsed + last_step_s < self.seconds


def make_optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    """AdamW with weight decay on matrices only (norms/biases are not decayed)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def lm_loss(model: PreTrainedModel, batch: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over a ``(B, L+1)`` window batch."""
    logits = model(input_ids=batch[:, :-1]).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))


Objective = Callable[[PreTrainedModel, int], tuple[torch.Tensor, int]]
"""One training step's loss: ``(model, step) -> (loss, tokens it trained on)``. Runs inside
the training autocast (bf16 where the CPU is faster with it); the loop owns the optimiser,
schedule, clipping, logging and saving."""


def next_token_objective(sampler: WindowSampler) -> Objective:
    """Plain next-token cross-entropy on windows drawn from ``sampler``."""
    def step_loss(model: PreTrainedModel, step: int) -> tuple[torch.Tensor, int]:
        del step
        batch = sampler.next()
        return lm_loss(model, batch), batch.numel() - batch.size(0)
    return step_loss


def train(model: PreTrainedModel, objective: Objective | WindowSampler, spec: TrainSpec,
          out_dir: Path, name: str) -> dict[str, float]:
    """Train until the budget is spent, save to ``out_dir``, return summary stats.

    ``objective`` is a step-loss function, or a window sampler for plain next-token training.
    """
    if isinstance(objective, WindowSampler):
        objective = next_token_objective(objective)
    torch.manual_seed(spec.seed)
    model.train()
    opt = make_optimizer(model, spec.peak_lr)
    bar = budget_bar(spec.steps or spec.seconds, name, "steps" if spec.steps else "s")
    t0 = time.time()
    step, tokens, ema, last_step_s = 0, 0, None, 0.0
    while spec.another_step_fits(step, elapsed := time.time() - t0, last_step_s):
        lr = lr_at(spec.progress(step, elapsed), spec.peak_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        with training_autocast():
            loss, n_tokens = objective(model, step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        last_step_s = time.time() - t0 - elapsed
        tokens += n_tokens
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        advance_to(bar, step if spec.steps else time.time() - t0)
        bar.set_postfix_str(f"loss {ema:.3f}", refresh=False)
        if step % spec.log_every == 0:
            print(f"[train {name}] step {step} t={elapsed:.0f}s loss={ema:.3f} lr={lr:.2e} "
                  f"tok/s={tokens / max(elapsed, 1e-6):.0f}", flush=True)
        if spec.save_every and step % spec.save_every == 0:
            model.save_pretrained(out_dir, safe_serialization=True)
    bar.close()
    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    stats = {"steps": step, "tokens": tokens, "seconds": time.time() - t0, "loss_ema": ema or 0.0}
    (out_dir / "train_stats.json").write_text(json.dumps(stats) + "\n")
    print(f"[train {name}] done {stats}", flush=True)
    return stats
