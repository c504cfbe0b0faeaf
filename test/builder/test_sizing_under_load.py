"""Draft sizing on a busy machine: the same choice as on a quiet one, or a clear warning.

A build measured while other jobs kept the load average at 4-6 chose the smallest draft shape
because larger ones happened to fall into busy spells. The sizing now interleaves and repeats
its measurements and makes step times monotone in the draft's size; what it cannot see through,
it flags. These tests run the real sizing on a small real target beside real CPU-bound
neighbour processes (one per core).
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from memspec_ros.builder.draft_architecture import Shape
from memspec_ros.builder.draft_sizing import _monotone, _without_outliers, choose_draft_shape
from memspec_ros.builder.machine_load import busy_message
from memspec_ros.builder.target_folder import TargetInfo

CANDIDATES = (Shape(hidden=256, layers=4, heads=4, kv_heads=4, intermediate=688),
              Shape(hidden=128, layers=2, heads=4, kv_heads=4, intermediate=352),
              Shape(hidden=48, layers=1, heads=2, kv_heads=2, intermediate=128))


def _target() -> tuple[LlamaForCausalLM, TargetInfo]:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=512, hidden_size=384, intermediate_size=1024, num_hidden_layers=6,
                         num_attention_heads=6, num_key_value_heads=6, max_position_embeddings=256)
    info = TargetInfo(path=None, model_type="llama", logit_width=512, hidden_size=384, max_positions=256,  # type: ignore[arg-type]
                      bos_token_id=1, eos_token_id=2, pad_token_id=0, weights_bytes=0, fingerprint="t")
    return LlamaForCausalLM(config).eval(), info


@contextmanager
def cpu_bound_neighbours() -> Iterator[None]:
    """One busy process per core, as other jobs on a robot computer."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_busy_machine_gives_the_quiet_machines_shape_or_a_warning() -> None:
    model, info = _target()
    quiet = choose_draft_shape(model, info, 4, candidates=CANDIDATES)
    with cpu_bound_neighbours():
        busy = choose_draft_shape(model, info, 4, candidates=CANDIDATES)
    assert busy.shape == quiet.shape or busy.unstable, (quiet.measured, busy.measured)
    assert busy.load_average >= 0.0 and "spread" in busy.measured[0]


def test_step_times_are_made_monotone_in_size() -> None:
    """A smaller shape measured slower than a larger one (a busy spell hit the smaller) gets the larger
    one's figure."""
    assert _monotone([5.0, 9.5, 4.2, 0.6]) == [5.0, 5.0, 4.2, 0.6]
    assert _monotone([2.0, 3.0, 1.0]) == [2.0, 2.0, 1.0]


def test_a_shape_measured_far_above_the_line_through_the_others_is_an_outlier() -> None:
    """A larger shape that caught a busy spell in most rounds cannot hand the choice to a smaller one:
    its figure is replaced by the robust line's (step time grows with the draft's parameters)."""
    sizes = [8_000_000, 4_000_000, 2_000_000, 1_000_000]
    fixed, replaced = _without_outliers(sizes, [30.0, 4.1, 2.0, 1.1])
    assert replaced == 1 and 7.0 < fixed[0] < 9.0 and fixed[1:] == [4.1, 2.0, 1.1]
    middle, replaced = _without_outliers(sizes, [8.2, 20.0, 2.0, 1.0])
    assert replaced == 1 and middle[1] < 5.0
    clean, replaced = _without_outliers(sizes, [8.5, 4.0, 2.2, 0.9])
    assert replaced == 0 and clean == [8.5, 4.0, 2.2, 0.9]


def test_the_busy_warning_names_the_load_and_the_remedy() -> None:
    assert busy_message("drafts", 0.5, 2) is None
    message = busy_message("drafts", 5.2, 2)
    assert message is not None and "5.2" in message and "--resize" in message
