"""Setting up the edge regime and the simulator's time model from measurements on this machine.

The paper's regime is "loading a draft costs about 2.7 decoding rounds". This machine reads a
draft from page cache in a few milliseconds, so the storage bandwidth is *emulated*: the
runtime's loader really reads the bytes, paced to a bandwidth chosen here so that the mean
draft's load (read + materialisation) takes ``ratio`` times a measured round. Steps, on the
separate calibration session (never one of the evaluated sessions):

1. the simulator's cost model: target verify/prefill and every draft's step and catch-up
   forward, timed on the real models (proposal and verify times from real engine rounds on
   the calibration prompts);
2. unthrottled load times (what materialisation alone costs);
3. the mean round time of a real runtime run (the static policy);
4. the bandwidth for the requested ratio, then real load times at that bandwidth;
5. the runtime's bookkeeping overheads (per round, per turn, per tick, per predictor call)
   from a real MemSpec run.

The ratio each real run then actually had is measured separately (``RuntimeStats``) and
reported beside the requested one.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from memspec_ros.runtime import (
    BackgroundLoader,
    Budget,
    CostModel,
    DraftPool,
    DraftRuntime,
    RuntimeConfig,
    StorageModel,
    calibrate_overheads,
    measure_cost_model,
)
from memspec_ros.runtime.turns import opening_ids

from .drift import Drift
from .policy_factory import PolicyFactory
from .real_runs import serve_session
from .speed_probe import target_step_s
from .testbed import Testbed
from .trace_cache import DialogueTraces
from .workloads import ScriptedDialogue


@dataclass
class Calibration:
    """The emulated storage and the simulator's cost model."""

    cost: CostModel
    storage: StorageModel
    round_s: float
    """Mean speculative round of a real run (stalls excluded), the unit of the load/round ratio."""
    unthrottled_load_s: dict[str, float]
    requested_ratio: float
    seconds: float
    drift: Drift | None = None
    """Compute-time factors measured on the headline's real rounds, applied to ``cost`` after it
    (:mod:`bench.drift`); None until the headline has run."""
    probe_s: float = 0.0
    """A plain target step timed right after the cost model (:mod:`bench.speed_probe`): the
    reference the headline's per-session probes are compared with. 0: not measured."""
    block_speeds: tuple[float, ...] = ()
    """Per session block of the headline: the median of the probes timed between its runs over
    :attr:`probe_s`; every run of the block is simulated at it (:mod:`bench.drift`)."""
    run_speeds: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Per configuration, per session: the machine's speed during its real run, from the run's own
    target verifications (:func:`bench.drift.verification_speed`); what each run is simulated at."""
    measured: CostModel | None = None
    """The cost model as measured, before the drift rescale (set with :attr:`drift`)."""

    def target_only_cost(self) -> CostModel:
        """The time model of plain target-only decoding: the measured model at its runs' mean speed
        (the probes' before the headline has run)."""
        base = self.measured or self.cost
        speeds = self.run_speeds.get("target-only") or self.block_speeds
        return base.compute_scaled(statistics.fmean(speeds)) if speeds else base

    @property
    def mean_load_s(self) -> float:
        """Mean load time of a draft at the emulated bandwidth."""
        return float(np.mean(list(self.cost.load_s.values())))

    @property
    def modelled_ratio(self) -> float:
        """Mean load time / measured round time."""
        return self.mean_load_s / self.round_s

    def loads_for_ratio(self, ratio: float) -> dict[str, float]:
        """Load times of a device ``ratio`` rounds per mean load (every draft scaled alike)."""
        scale = ratio / self.modelled_ratio
        return {n: s * scale for n, s in self.cost.load_s.items()}

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly."""
        return {"round_s": self.round_s, "requested_ratio": self.requested_ratio,
                "modelled_ratio": self.modelled_ratio, "mean_load_s": self.mean_load_s,
                "bandwidth_bytes_per_s": self.storage.bandwidth_bytes_per_s,
                "unthrottled_load_s": self.unthrottled_load_s, "seconds": self.seconds,
                "drift": dataclasses.asdict(self.drift) if self.drift else None,
                "probe_s": self.probe_s, "block_speeds": list(self.block_speeds),
                "run_speeds": {n: list(v) for n, v in self.run_speeds.items()},
                "cost_model": json.loads(self.cost.to_json())}


def measure_load_times(testbed: Testbed, storage: StorageModel, repeats: int = 2) -> dict[str, float]:
    """Median real load time of every draft through the runtime's loader at ``storage``."""
    pool = DraftPool(testbed.catalogue, Budget.unlimited())
    loader = BackgroundLoader(pool, testbed.materialize, storage)
    try:
        for spec in testbed.catalogue:
            for _ in range(repeats):
                loader.request(spec.name).wait(60)
                pool.evict(spec.name)
        records = loader.records()
    finally:
        loader.close()
    return {s.name: float(np.median([r.load_s for r in records if r.name == s.name and r.outcome == "loaded"]))
            for s in testbed.catalogue}


def calibrate(testbed: Testbed, session: ScriptedDialogue, context: DialogueTraces, *, ratio: float, budget: Budget,
              k: int, check_interval: int, repeats: int, factory: PolicyFactory,
              storage: StorageModel | None = None) -> Calibration:
    """Run steps 1-5 of the module docstring on ``session``; ``context`` gives realistic tokens to time on.

    ``storage``: keep this emulated storage instead of choosing the bandwidth for ``ratio`` (the
    same device measured at another thread count: the flash does not speed up with the CPU).
    """
    t0 = time.perf_counter()
    # Proposal and verify times from real engine rounds on the calibration prompts, not from
    # micro-benchmarks alone: with warm caches those were off by up to ~10% in either direction
    # from run to run, one common offset that showed in every policy's simulation.
    cost = measure_cost_model(testbed.engine.target, testbed.proposers, context.context_tokens(), k,
                              repeats=repeats, engine=testbed.engine,
                              round_prompts=[opening_ids(testbed.engine, t) for t in session.turns],
                              max_new_tokens=max(t.max_new_tokens for t in session.turns))
    probe_prompt = opening_ids(testbed.engine, session.turns[0])
    probe_s = target_step_s(testbed.engine, probe_prompt)  # the machine's speed when the model was measured
    unthrottled = measure_load_times(testbed, StorageModel())
    static = DraftRuntime(testbed.engine, testbed.catalogue, budget, factory("static"),
                          RuntimeConfig(k=k, check_interval=check_interval), materialize=testbed.materialize)
    try:
        static.warm_up()
        serve_session(static, session)
        round_s = static.statistics().mean_round_s or cost.mean_round_s(k)
    finally:
        static.close()
    mean_size = statistics.fmean(s.stored_bytes for s in testbed.catalogue)  # bytes a load reads
    materialize_s = statistics.fmean(unthrottled.values())
    if storage is None:
        read_s = max(1e-3, ratio * round_s - materialize_s)
        storage = StorageModel(bandwidth_bytes_per_s=mean_size / read_s)
    cost = cost.with_loads(measure_load_times(testbed, storage))
    config = RuntimeConfig(k=k, check_interval=check_interval, storage=storage)
    rt = DraftRuntime(testbed.engine, testbed.catalogue, budget, factory("memspec"), config,
                      materialize=testbed.materialize)
    try:
        rt.warm_up()
        reports = serve_session(rt, session)
        cost = calibrate_overheads(cost, reports, rt.statistics())
    finally:
        rt.close()
    return Calibration(cost=cost, storage=storage, round_s=round_s, unthrottled_load_s=unthrottled,
                       requested_ratio=ratio, seconds=time.perf_counter() - t0, probe_s=probe_s)
