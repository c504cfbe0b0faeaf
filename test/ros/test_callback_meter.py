"""The per-callback figures /diagnostics reports (no node: a meter on a hand-driven clock)."""

from __future__ import annotations

import pytest

from memspec_ros.ros.callback_meter import CallbackMeter


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_time_per_call_and_calls_per_second_over_recent_calls() -> None:
    clock = _Clock()
    meter = CallbackMeter(window=8, horizon_s=10.0, clock=clock)
    assert meter.reading().calls == 0 and meter.reading().calls_per_s == 0.0

    def work(seconds: float) -> str:
        clock.now += seconds
        return "done"

    timed = meter.timed(work)
    for _ in range(5):
        assert timed(0.002) == "done"
        clock.now += 1.0
    reading = meter.reading()
    assert reading.calls == 5
    assert reading.mean_s == pytest.approx(0.002)
    assert reading.calls_per_s == pytest.approx(0.5)  # 5 calls within the 10 s horizon
    clock.now += 60.0
    assert meter.reading().calls_per_s == 0.0 and meter.reading().calls == 5


def test_a_failing_call_is_counted_and_a_fast_stream_is_not_capped_by_the_window() -> None:
    clock = _Clock()
    meter = CallbackMeter(window=8, horizon_s=10.0, clock=clock)

    def boom() -> None:
        raise RuntimeError("x")

    with pytest.raises(RuntimeError):
        meter.timed(boom)()
    assert meter.reading().calls == 1
    for _ in range(100):  # 100 calls/s: the 8-call window covers 70 ms of them
        clock.now += 0.01
        meter.record(0.001)
    assert meter.reading().calls_per_s == pytest.approx(100.0, rel=0.2)
