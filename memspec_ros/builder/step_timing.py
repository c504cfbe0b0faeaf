"""Inference step timing on this machine: the physics check of speculative decoding.

Measured exactly as the runtime decodes: the node's own draft forward and target scorer,
batch 1, a KV cache prefilled with a ~96-token context, then a 1-token step (draft) or a
5-token verify step (target); the cache is rolled back after each call so every sample sees
the same context length. A measurement is a block of calls and its median; callers repeat blocks
interleaved with the other models' (the machine is shared: a block that overlapped another
job's burst measures that job, not the model).
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

import torch
from transformers import PreTrainedModel


def _tokens(vocab: int, context: int, n_new: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random ``(1, context)`` prefix and ``(1, n_new)`` continuation, seeded."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, context), generator=g), torch.randint(0, vocab, (1, n_new), generator=g)


def _target_call(model: PreTrainedModel, prefix: torch.Tensor, new: torch.Tensor) -> Callable[[], None]:
    """One verify pass of ``new`` after ``prefix`` as the runtime scores it (the node's
    :class:`~memspec_ros.core.scorer.TargetScorer`), rolled back after each call."""
    from memspec_ros.core.scorer import TargetScorer

    scorer = TargetScorer(model)
    scorer.prefill(prefix[0].tolist())
    block = new[0].tolist()

    def call() -> None:
        scorer.score(block)
        scorer.rollback(len(block))
    return call


def _draft_call(model: PreTrainedModel, prefix: torch.Tensor, token: int) -> Callable[[], None]:
    """One draft step as the runtime takes it (:func:`memspec_ros.core.draft_forward.make_draft_forward`,
    the proposer's lean forward for Llama drafts), truncated back after each call."""
    from memspec_ros.core.draft_forward import make_draft_forward

    forward = make_draft_forward(model)
    context = prefix.shape[1]
    vocab = int(model.config.vocab_size)  # a subset draft reads fewer ids than the target: any will do
    forward.feed((prefix[0] % vocab).tolist())
    token %= vocab

    def call() -> None:
        forward.feed([token])
        forward.truncate(context)
    return call


def _ms(call: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1000.0


def target_timer(model: PreTrainedModel, n_new: int, context: int = 96, seed: int = 0) -> Callable[[int], float]:
    """A block timer of the target's forward of ``n_new`` tokens: ``timer(reps)`` is the median ms
    of ``reps`` calls after one untimed call (for measurements interleaved with others)."""
    prefix, new = _tokens(model.config.vocab_size, context, n_new, seed)
    return _block_timer(_target_call(model, prefix, new))


def draft_timer(model: PreTrainedModel, context: int = 96, seed: int = 0) -> Callable[[int], float]:
    """:func:`target_timer` for a draft's 1-token step through the node's draft forward."""
    prefix, new = _tokens(model.config.vocab_size, context, 1, seed)
    with torch.inference_mode():
        call = _draft_call(model, prefix, int(new[0, 0]))
    return _block_timer(call)


def _block_timer(call: Callable[[], None]) -> Callable[[int], float]:
    @torch.inference_mode()
    def block(reps: int) -> float:
        call()
        return statistics.median(_ms(call) for _ in range(reps))
    return block


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
    prefix, new = _tokens(target.config.vocab_size, context, k + 1, seed)
    target_step, target_verify = _target_call(target, prefix, new[:, :1]), _target_call(target, prefix, new)
    draft_calls = {name: _draft_call(model, prefix, int(new[0, 0])) for name, model in drafts.items()}
    step_times: list[float] = []
    verify_times: list[float] = []
    draft_times: dict[str, list[float]] = {n: [] for n in drafts}  # apart: a draft may have any name
    for cycle in range(warmup + cycles):
        keep = cycle >= warmup
        step = _ms(target_step)
        verifies = [_ms(target_verify)] if not draft_calls else []
        proposals: dict[str, list[float]] = {}
        for name, call in draft_calls.items():  # a round as the runtime runs it: verification, k proposals
            verifies.append(_ms(target_verify))
            proposals[name] = [_ms(call) for _ in range(k)]
        if keep:
            step_times.append(step)
            verify_times.extend(verifies)
            for name, times in proposals.items():
                draft_times[name].extend(times)
    return (statistics.median(step_times), statistics.median(verify_times),
            {n: statistics.median(v) for n, v in draft_times.items()})
