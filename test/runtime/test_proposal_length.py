"""A policy's per-round proposal length, honoured alike by real engine rounds and the simulator."""

from __future__ import annotations

import pytest

from memspec_ros.runtime import Budget, DraftRuntime, RuntimeConfig, Simulator, StorageModel
from memspec_ros.runtime.policies.base import Decision, Policy, PolicyView, SchedulePlan

from .rt_tiny_zoo import DIALOGUE
from .test_simulator import _cost  # the simulator tests' cost model of the tiny world


class FixedLength(Policy):
    """Always the exact copy of the target, asking for ``k`` proposals (in or out of range)."""

    name = "fixed-length"

    def __init__(self, k: int | None) -> None:
        super().__init__()
        self.asked = k

    def _choose(self, view: PolicyView) -> Decision:
        return Decision("draft-copy", k=self.asked) if view.is_resident("draft-copy") else Decision(None)

    def _plan(self, view: PolicyView) -> SchedulePlan:
        return SchedulePlan(want=("draft-copy",))

    def initial_working_set(self) -> list[str]:
        return ["draft-copy"]


def _proposals(reports) -> set[int]:
    return {ev.proposed for r in reports for ev in r.timeline if ev.draft is not None}


@pytest.mark.parametrize(("asked", "expected_max"), [(99, 4), (0, 1), (2, 2), (None, 4)])
def test_the_runtime_clamps_the_asked_length_to_1_and_its_k(world, reference_outputs, asked, expected_max) -> None:
    config = RuntimeConfig(k=4, storage=StorageModel.mb_per_s(None))
    with DraftRuntime(world.engine, world.catalogue, Budget.drafts(2), FixedLength(asked), config) as rt:
        rt.warm_up()
        reports = rt.run_dialogue(DIALOGUE)
    assert [r.output_ids for r in reports] == reference_outputs
    assert max(_proposals(reports)) == expected_max and min(_proposals(reports)) >= 1
    sim = Simulator(world.catalogue, Budget.drafts(2), FixedLength(asked), _cost(world), RuntimeConfig(k=4))
    sim.warm_up()
    simulated = sim.run(world.trace).reports
    assert [r.output_ids for r in simulated] == reference_outputs
    assert max(_proposals(simulated)) == expected_max and min(_proposals(simulated)) >= 1
