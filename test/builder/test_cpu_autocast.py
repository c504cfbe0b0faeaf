"""Training uses bf16 autocast only where this CPU multiplies bf16 clearly faster than fp32."""

from __future__ import annotations

import pytest
import torch

from memspec_ros.builder import cpu_autocast


@pytest.fixture
def fresh_choice():
    cpu_autocast.bf16_autocast_pays.cache_clear()
    yield
    cpu_autocast.bf16_autocast_pays.cache_clear()


@pytest.mark.parametrize(("bf16_s", "fp32_s", "pays"), [(0.5, 1.0, True), (0.9, 1.0, False), (100.0, 1.0, False)])
def test_the_choice_follows_the_measured_matmuls(fresh_choice, monkeypatch, capsys, bf16_s, fp32_s, pays):
    timings = {torch.bfloat16: bf16_s, torch.float32: fp32_s}
    monkeypatch.setattr(cpu_autocast, "_best_matmul_s", timings.__getitem__)
    assert cpu_autocast.bf16_autocast_pays() is pays
    assert cpu_autocast.training_autocast()._enabled is pays
    assert f"bf16 autocast {'on' if pays else 'off'}" in capsys.readouterr().out


def test_this_machine_gets_a_measured_answer_once(fresh_choice, capsys):
    first = cpu_autocast.bf16_autocast_pays()
    assert cpu_autocast.bf16_autocast_pays() is first
    assert capsys.readouterr().out.count("bf16 autocast") == 1
