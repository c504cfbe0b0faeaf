"""Inference step timing on this machine: the physics check of speculative decoding.

Measured exactly as the runtime decodes: plain transformers forward, batch 1, fp32, a KV
cache prefilled with a ~96-token context, then a 1-token step (draft) or a 5-token verify
step (target); the cache is cropped back after each call so every sample sees the same
context length. We take the median of each block of calls and report the lowest of three
block medians: the machine is shared, and a block that overlapped another job's burst
measures that job, not the model.
"""
from __future__ import annotations

import statistics
import time

import torch
from transformers import DynamicCache, PreTrainedModel


@torch.inference_mode()
def step_ms(model: PreTrainedModel, n_new: int, context: int = 96, reps: int = 40,
            seed: int = 0, blocks: int = 3) -> float:
    """Median milliseconds of one forward of ``n_new`` tokens on a ``context``-token cache."""
    g = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    prefix = torch.randint(0, vocab, (1, context), generator=g)
    new = torch.randint(0, vocab, (1, n_new), generator=g)
    cache = DynamicCache(config=model.config)
    model(input_ids=prefix, cache=cache, use_cache=True)
    medians: list[float] = []
    for _ in range(blocks):
        times: list[float] = []
        for i in range(reps + 5):
            t0 = time.perf_counter()
            model(input_ids=new, cache=cache, use_cache=True)
            dt = time.perf_counter() - t0
            cache.crop(-n_new)
            if i >= 5:  # warm-up calls excluded
                times.append(dt * 1000.0)
        medians.append(statistics.median(times))
    return min(medians)


@torch.inference_mode()
def draft_step_ms(model: PreTrainedModel, context: int = 96, reps: int = 40, seed: int = 0,
                  blocks: int = 3) -> float:
    """Median milliseconds of one draft step as the runtime takes it (1 token, KV cache).

    Goes through :func:`memspec_ros.core.draft_forward.make_draft_forward`, the forward the
    node's proposer uses (a lean functional forward for Llama drafts), because that step, not
    the plain transformers forward, is what speculation pays per proposed token.
    """
    from memspec_ros.core.draft_forward import make_draft_forward

    g = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    prefix = torch.randint(0, vocab, (context,), generator=g).tolist()
    new = int(torch.randint(0, vocab, (1,), generator=g))
    forward = make_draft_forward(model)
    forward.feed(prefix)
    medians: list[float] = []
    for _ in range(blocks):
        times: list[float] = []
        for i in range(reps + 5):
            t0 = time.perf_counter()
            forward.feed([new])
            dt = time.perf_counter() - t0
            forward.truncate(context)
            if i >= 5:
                times.append(dt * 1000.0)
        medians.append(statistics.median(times))
    return min(medians)
