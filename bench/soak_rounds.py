"""``python -m bench.soak_rounds --rounds 1000000``: a long runtime run, RSS and containers sampled.

A robot's node decodes for weeks, so anything the runtime keeps per round or per load must be
a rolling window or a running aggregate. This drives a real :class:`DraftRuntime` (bundled zoo,
memspec policy under a two-draft budget, topic shifts every turn so drafts keep loading and
evicting) for a given number of speculative rounds and samples, every ``--sample-every``
rounds, the process RSS and the length of every container held by the runtime's long-lived
objects. The verdict compares the second half of the run with the first: RSS growth per
10,000 rounds and any container that is longer at the end than it ever was at the midpoint.

:func:`soak` and :func:`container_sizes` are what ``test/runtime/test_memory_bounds.py``
runs at 10,000 rounds on a tiny zoo.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.trend import least_squares_slope
from memspec_ros.runtime import DraftRuntime
from memspec_ros.runtime.simulator import Simulator
from memspec_ros.runtime.traces import DialogueTrace

_PAGE = 4096


def rss_bytes() -> int:
    """Resident set size of this process now (Linux ``/proc``)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE


def long_lived_objects(runtime: DraftRuntime) -> dict[str, object]:
    """The objects a runtime keeps for its whole life, by name."""
    objects: dict[str, object] = {"runtime": runtime, "pool": runtime.pool, "loader": runtime.loader,
                                  "scheduler": runtime.scheduler, "tracker": runtime.tracker,
                                  "context": runtime.context, "policy": runtime.policy}
    predictor = getattr(runtime.policy, "predictor", None)
    if predictor is not None:
        objects["predictor"] = predictor
    return objects


def container_sizes(runtime: DraftRuntime) -> dict[str, int]:
    """Length of every list, deque, dict and set attribute of the runtime's long-lived objects."""
    sizes: dict[str, int] = {}
    for owner, obj in long_lived_objects(runtime).items():
        for attr, value in vars(obj).items():
            if isinstance(value, (list, deque, dict, set, frozenset, tuple)):
                sizes[f"{owner}.{attr}"] = len(value)
    return sizes


@dataclass
class SoakSample:
    """One sample of the run."""

    rounds: int
    seconds: float
    rss_bytes: int
    containers: dict[str, int]


@dataclass
class SoakResult:
    """Samples of a whole run and the verdict on them."""

    rounds: int
    turns: int
    samples: list[SoakSample] = field(default_factory=list)

    def rss_growth_per_10k(self) -> float:
        """RSS growth per 10,000 rounds over the second half of the run (bytes).

        A least-squares slope over every sample of the second half, not end minus midpoint:
        the allocator makes RSS wobble by megabytes between samples, a leak is a trend.
        """
        mid, _ = self._half()
        return least_squares_slope([(s.rounds, s.rss_bytes) for s in self.samples if s.rounds >= mid.rounds]) * 10_000

    def grown_containers(self) -> dict[str, tuple[int, int]]:
        """Containers longer at the end than at any sample up to the midpoint: ``{name: (before, end)}``."""
        mid, end = self._half()
        first_half = [s for s in self.samples if s.rounds <= mid.rounds]
        grown = {}
        for name, length in end.containers.items():
            before = max(s.containers.get(name, 0) for s in first_half)
            if length > before:
                grown[name] = (before, length)
        return grown

    def _half(self) -> tuple[SoakSample, SoakSample]:
        end = self.samples[-1]
        mid = min(self.samples, key=lambda s: abs(s.rounds - end.rounds / 2))
        return mid, end


def soak(runtime: DraftRuntime, prompts: Sequence[str], rounds: int, *, max_new_tokens: int = 32,
         sample_every: int = 1000, on_sample: Callable[[SoakSample], None] | None = None) -> SoakResult:
    """Serve ``prompts`` round-robin, one fresh dialogue per turn, until ``rounds`` rounds ran.

    Fresh dialogues keep the target's context bounded (sessions and their KV budget are the
    node's business); everything the runtime itself keeps across turns is what is measured.
    """
    cycle: Iterator[str] = itertools.cycle(prompts)

    def one_turn() -> tuple[int, int]:
        return runtime.generate(next(cycle), max_new_tokens).rounds, 1

    return _sampled(runtime, one_turn, rounds, sample_every, on_sample)


def soak_simulated(simulator: Simulator, traces: Sequence[DialogueTrace], rounds: int, *,
                   sample_every: int = 10_000,
                   on_sample: Callable[[SoakSample], None] | None = None) -> SoakResult:
    """Replay ``traces`` round-robin through one simulator until ``rounds`` rounds ran.

    A :class:`~memspec_ros.runtime.simulator.Simulator` is a :class:`DraftRuntime` whose rounds
    come from exact traces on a virtual clock: the same round loop, pool, scheduler, trackers,
    policy and predictor, at a fraction of a millisecond per round. That makes 10^6 rounds of
    the runtime's own bookkeeping a matter of minutes; what only real rounds hold (KV caches,
    draft forwards) is bounded per turn and measured by :func:`soak` and the node's soak.
    """
    cycle: Iterator[DialogueTrace] = itertools.cycle(traces)

    def one_session() -> tuple[int, int]:
        result = simulator.run(next(cycle))
        return sum(r.rounds for r in result.reports), len(result.reports)

    return _sampled(simulator.runtime, one_session, rounds, sample_every, on_sample)


def _sampled(runtime: DraftRuntime, step: Callable[[], tuple[int, int]], rounds: int, sample_every: int,
             on_sample: Callable[[SoakSample], None] | None) -> SoakResult:
    """Call ``step`` (returns rounds and turns it ran) until ``rounds``; sample every ``sample_every``."""
    result = SoakResult(rounds=0, turns=0)
    t0 = time.perf_counter()
    next_sample = 0
    while result.rounds < rounds:
        if result.rounds >= next_sample:
            sample = SoakSample(result.rounds, time.perf_counter() - t0, rss_bytes(), container_sizes(runtime))
            result.samples.append(sample)
            if on_sample is not None:
                on_sample(sample)
            next_sample += sample_every
        ran, turns = step()
        result.rounds += ran
        result.turns += turns
    result.samples.append(SoakSample(result.rounds, time.perf_counter() - t0, rss_bytes(), container_sizes(runtime)))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak on the bundled zoo and print samples and the verdict (JSON with ``--out``)."""
    from memspec_ros.bundled_models import bundled_zoo_root
    from memspec_ros.core.engine import SpeculativeEngine
    from memspec_ros.core.model_loading import configure_threads, load_causal_lm, load_tokenizer
    from memspec_ros.runtime import Budget, Catalogue, RuntimeConfig, load_catalogue_file, make_policy
    from memspec_ros.runtime.heap_tuning import fix_malloc_thresholds
    from memspec_ros.runtime.workload import load_prompts

    fix_malloc_thresholds()  # as memspec_node does: the heap must be the node's to measure it

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1_000_000)
    parser.add_argument("--sample-every", type=int, default=10_000)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--zoo", type=Path, default=bundled_zoo_root())
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write samples and verdict as JSON here")
    parser.add_argument("--simulated", action="store_true",
                        help="rounds replayed from exact traces of the zoo on a virtual clock (the runtime's own "
                             "loop and bookkeeping, ~0.1 ms a round) instead of real engine rounds (~25 ms)")
    args = parser.parse_args(argv)

    configure_threads(args.threads)
    models = load_catalogue_file(args.zoo)
    engine = SpeculativeEngine(load_causal_lm(models.target), load_tokenizer(models.target))
    catalogue = Catalogue.from_file(models)
    prompts_file = models.source.parent / "heldout" / "prompts.jsonl"
    by_domain = load_prompts(prompts_file)
    # Alternate domains turn by turn, so the working set keeps changing (loads and evictions).
    prompts = [p for group in itertools.zip_longest(*by_domain.values()) for p in group if p]
    policy = make_policy("memspec", predictor=models.predictor, draft_names=catalogue.names)

    def show(s: SoakSample) -> None:
        print(f"rounds {s.rounds:>9}  t {s.seconds:8.1f}s  rss {s.rss_bytes / 2**20:8.1f} MiB", flush=True)

    if args.simulated:
        simulator, traces = _simulator(engine, catalogue, policy, by_domain, args.max_new_tokens)
        simulator.warm_up()
        result = soak_simulated(simulator, traces, args.rounds, sample_every=args.sample_every,
                                on_sample=show)
    else:
        with DraftRuntime(engine, catalogue, Budget.drafts(2), policy, RuntimeConfig()) as runtime:
            runtime.warm_up()
            result = soak(runtime, prompts, args.rounds, max_new_tokens=args.max_new_tokens,
                          sample_every=args.sample_every, on_sample=show)
    show(result.samples[-1])
    verdict = {"mode": "simulated" if args.simulated else "real", "rounds": result.rounds, "turns": result.turns,
               "rss_growth_per_10k_rounds_bytes": result.rss_growth_per_10k(),
               "grown_containers": result.grown_containers()}
    print(json.dumps(verdict, indent=1))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({**verdict, "samples": [asdict(s) for s in result.samples]}, indent=1))
    return 1 if verdict["grown_containers"] else 0


def _simulator(engine, catalogue, policy, by_domain: dict[str, list[str]],
               max_new_tokens: int) -> tuple[Simulator, list[DialogueTrace]]:
    """A simulator over exact traces of four six-turn, topic-shifting sessions of the zoo."""
    from memspec_ros.core.model_loading import load_causal_lm
    from memspec_ros.core.proposer import DraftProposer
    from memspec_ros.core.token_map import load_token_map
    from memspec_ros.runtime import Budget, RuntimeConfig
    from memspec_ros.runtime.cost_model import measure_cost_model
    from memspec_ros.runtime.traces import record_dialogue
    from memspec_ros.runtime.workload import multi_domain_dialogues

    drafts = {spec.name: load_causal_lm(spec.path) for spec in catalogue}
    sessions = multi_domain_dialogues(by_domain, sessions=4, turns=6, max_new_tokens=max_new_tokens, seed=0)
    proposers = {s.name: DraftProposer(drafts[s.name], s.name, load_token_map(s.path)) for s in catalogue}
    traces = [record_dialogue(engine, proposers, turns, name=f"soak-{i}") for i, turns in enumerate(sessions)]
    context = engine.encode(sessions[0][0].prompt)
    cost = measure_cost_model(engine.target, proposers, context, 4, load_s={n: 0.05 for n in drafts})
    return Simulator(catalogue, Budget.drafts(2), policy, cost, RuntimeConfig()), traces


if __name__ == "__main__":
    sys.exit(main())
