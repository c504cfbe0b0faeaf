"""Training uses bf16 autocast only where this CPU multiplies bf16 clearly faster than fp32."""

from __future__ import annotations

import pytest

from memspec_ros.builder import cpu_autocast


@pytest.mark.parametrize(("bf16_s", "fp32_s", "pays"), [(0.5, 1.0, True), (0.9, 1.0, False), (100.0, 1.0, False)])
def test_the_rule_wants_bf16_clearly_faster(bf16_s, fp32_s, pays):
    assert cpu_autocast.bf16_is_clearly_faster(bf16_s, fp32_s) is pays


def test_this_machine_gets_a_measured_answer_once_and_autocast_follows_it(capsys):
    cpu_autocast.bf16_autocast_pays.cache_clear()
    try:
        first = cpu_autocast.bf16_autocast_pays()
        assert cpu_autocast.bf16_autocast_pays() is first
        assert cpu_autocast.training_autocast()._enabled is first
        out = capsys.readouterr().out
        assert out.count("bf16 autocast") == 1
        assert f"bf16 autocast {'on' if first else 'off'}" in out
    finally:
        cpu_autocast.bf16_autocast_pays.cache_clear()
