"""Memory stays bounded over a long run: containers do not grow per round, RSS stays flat.

10,000 real rounds on the tiny zoo (memspec under a two-draft budget, topics shifting every
turn, so drafts keep loading and being evicted): every list, deque, dict and set held by the
runtime's long-lived objects must be no longer at the end than it ever was by the midpoint,
and the RSS trend over the second half must stay under a tolerance (see below). The same
driver runs 10^6 rounds on the bundled zoo: ``python -m bench.soak_rounds``.
"""

from __future__ import annotations

import pytest

from bench.soak_rounds import container_sizes, soak
from memspec_ros.runtime import Budget, DraftRuntime, RuntimeConfig, make_policy
from memspec_ros.runtime.loader import RECENT_LOAD_RECORDS

from .rt_tiny_zoo import TEXT

ROUNDS = 10_000

# A leak the issue names costs at least a float per round (the old _round_seconds list: 8 B
# in the list + a 24 B float object) = 320 KB per 10,000 rounds, a RoundEvent-sized record
# ~2 MB. Allocator noise on this run is ~1 MB between samples, but the slope fitted over the
# 5,000-round second half averages it out; 1.5 MiB per 10,000 rounds separates the two.
RSS_SLOPE_TOLERANCE = 1.5 * 2**20


@pytest.fixture()
def long_runtime(world):
    policy = make_policy("memspec", predictor=world.predictor, draft_names=world.catalogue.names)
    with DraftRuntime(world.engine, world.catalogue, Budget.drafts(2), policy, RuntimeConfig()) as rt:
        rt.warm_up()
        yield rt


def test_ten_thousand_rounds_keep_containers_bounded_and_rss_flat(long_runtime) -> None:
    prompts = sorted(set(TEXT), key=TEXT.index)  # five domains, alternating turn by turn
    result = soak(long_runtime, [p[:24] for p in prompts], ROUNDS, max_new_tokens=24, sample_every=500)
    assert result.rounds >= ROUNDS
    stats = long_runtime.statistics()
    assert stats.rounds == result.rounds and stats.mean_round_s is not None
    assert stats.loads > 0, "the run must exercise loads and evictions"
    assert result.grown_containers() == {}, result.grown_containers()
    sizes = container_sizes(long_runtime)
    assert sizes["loader._records"] <= RECENT_LOAD_RECORDS
    assert sizes["tracker._window"] <= 64
    slope = result.rss_growth_per_10k()
    rss = [(s.rounds, round(s.rss_bytes / 2**20, 1)) for s in result.samples]
    assert slope < RSS_SLOPE_TOLERANCE, f"RSS grows {slope / 2**20:.2f} MiB per 10k rounds: {rss}"
    print(f"\n{result.rounds} rounds, {result.turns} turns, {result.samples[-1].seconds:.1f}s, "
          f"RSS slope {slope / 2**20:.3f} MiB/10k rounds, loads {stats.loads}; RSS MiB by round: {rss}")
