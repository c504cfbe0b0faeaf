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
from collections.abc import Callable, Mapping

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


@torch.inference_mode()
def interleaved_step_ms(target: PreTrainedModel, drafts: Mapping[str, PreTrainedModel], k: int,
                        context: int = 96, cycles: int = 60, warmup: int = 5,
                        seed: int = 0) -> tuple[float, float, dict[str, float]]:
    """The target's 1-token step, its (k+1)-token verification and every draft's step, timed in turns.

    Why turns: on a shared machine the speed changes for seconds at a time (the same draft shape
    measured 0.6 and 1.9 ms a minute apart), and a verdict rests on the *ratio* of a draft's step
    to the target's verification. Timing them one after the other puts each in a different spell;
    cycles of a verification followed by k proposals of each draft (a round as the runtime runs
    it, so a draft's first step after the target's pays the cold caches it pays in the node),
    medians over the cycles, put every spell into all of them alike.
    Returns (target step ms, target verify ms, {draft: step ms}).
    """
    from memspec_ros.core.draft_forward import make_draft_forward

    g = torch.Generator().manual_seed(seed)
    vocab = target.config.vocab_size
    prefix = torch.randint(0, vocab, (1, context), generator=g)
    new = torch.randint(0, vocab, (1, k + 1), generator=g)

    def target_call(n_new: int) -> Callable[[], None]:
        cache = DynamicCache(config=target.config)
        target(input_ids=prefix, cache=cache, use_cache=True)

        def call() -> None:
            target(input_ids=new[:, :n_new], cache=cache, use_cache=True)
            cache.crop(-n_new)
        return call

    def draft_call(model: PreTrainedModel) -> Callable[[], None]:
        forward = make_draft_forward(model)
        forward.feed(prefix[0].tolist())
        token = [int(new[0, 0])]

        def call() -> None:
            forward.feed(token)
            forward.truncate(context)
        return call

    target_step, target_verify = target_call(1), target_call(k + 1)
    draft_calls = {name: draft_call(model) for name, model in drafts.items()}
    target_times: dict[str, list[float]] = {"step": [], "verify": []}
    draft_times: dict[str, list[float]] = {n: [] for n in drafts}  # apart: a draft may have any name

    def timed(into: list[float], call: Callable[[], None], keep: bool) -> None:
        t0 = time.perf_counter()
        call()
        if keep:
            into.append((time.perf_counter() - t0) * 1000.0)

    for cycle in range(warmup + cycles):
        keep = cycle >= warmup
        timed(target_times["step"], target_step, keep)
        for name, call in draft_calls.items() or [("", None)]:  # a round as the runtime runs it: verify, k proposals
            timed(target_times["verify"], target_verify, keep)
            for _ in range(k if call is not None else 0):
                timed(draft_times[name], call, keep)
    return (statistics.median(target_times["step"]), statistics.median(target_times["verify"]),
            {n: statistics.median(v) for n, v in draft_times.items()})
