"""The background loader: real reads, emulated bandwidth, cancel, timeout, broken files."""

from __future__ import annotations

import time

from memspec_ros.runtime import BackgroundLoader, Budget, DraftPool, DraftState, StorageModel, make_materializer


def _pool_loader(cat, mb_per_s=None, **kw):
    pool = DraftPool(cat, Budget.drafts(2))
    loader = BackgroundLoader(pool, make_materializer(cat), StorageModel.mb_per_s(mb_per_s), **kw)
    return pool, loader


def test_load_materialises_a_working_proposer(world) -> None:
    pool, loader = _pool_loader(world.catalogue)
    try:
        ticket = loader.request("draft-copy")
        assert ticket.wait(30) and ticket.outcome == "loaded"
        proposer = pool.acquire("draft-copy")
        ids = world.engine.encode("robot move to the")
        from memspec_ros.core.sampling import GREEDY
        assert len(proposer.propose(ids, 3, GREEDY).tokens) == 3
        pool.release("draft-copy")
    finally:
        loader.close()


def test_emulated_bandwidth_paces_the_read(world) -> None:
    name = "draft-copy"
    size = world.catalogue.get(name).stored_bytes
    mbps = size / 0.25 / 1e6  # a 0.25 s read
    pool, loader = _pool_loader(world.catalogue, mbps)
    progress = []
    pool.add_listener(lambda e: progress.append(e.snapshot.status(name).load_progress) if e.draft == name else None)
    try:
        t0 = time.perf_counter()
        assert loader.request(name).wait(30)
        elapsed = time.perf_counter() - t0
        rec = loader.records()[-1]
        # Pacing makes a read at least as slow as the emulated storage (a lower bound that
        # load on the machine cannot break); how much slower a busy machine makes it is not
        # this test's business.
        assert rec.outcome == "loaded" and rec.read_s >= 0.23 and elapsed >= 0.23, (rec, elapsed)
        assert len([p for p in progress if 0 < p < 1]) >= 1  # progress was published while reading
    finally:
        loader.close()


def test_cancelled_load_leaves_the_pool_consistent(world) -> None:
    name = "draft-copy"
    size = world.catalogue.get(name).stored_bytes
    pool, loader = _pool_loader(world.catalogue, size / 60.0 / 1e6)  # a 60 s read
    try:
        ticket = loader.request(name)
        deadline = time.monotonic() + 30
        while pool.state(name) != DraftState.LOADING and time.monotonic() < deadline:
            time.sleep(0.005)
        assert pool.state(name) == DraftState.LOADING
        t0 = time.perf_counter()
        assert loader.cancel(name)
        # Abandoned mid-read: long before the 60 s the read would take, however busy the machine.
        assert ticket.wait(30) and ticket.outcome == "cancelled"
        assert time.perf_counter() - t0 < 30
        assert pool.state(name) == DraftState.ON_STORAGE and pool.used_bytes() == 0
        assert pool.failures(name) == 0  # a cancel is not a failure
        # the loader still works afterwards
        assert loader.request("draft-robot").wait(30) and pool.state("draft-robot") == DraftState.RESIDENT
    finally:
        loader.close()


def test_queued_load_can_be_cancelled(world) -> None:
    size = world.catalogue.get("draft-copy").stored_bytes
    pool, loader = _pool_loader(world.catalogue, size / 0.5 / 1e6)
    try:
        first = loader.request("draft-copy")
        queued = loader.request("draft-noisy")
        assert loader.cancel("draft-noisy") and queued.outcome == "cancelled"
        assert first.wait(30) and first.outcome == "loaded"
        assert pool.state("draft-noisy") == DraftState.ON_STORAGE
    finally:
        loader.close()


def test_load_timeout_is_reported(world) -> None:
    size = world.catalogue.get("draft-copy").stored_bytes
    failures = []
    pool, loader = _pool_loader(world.catalogue, size / 60.0 / 1e6, timeout_s=0.2, on_failure=failures.append)
    try:
        t0 = time.perf_counter()
        ticket = loader.request("draft-copy")
        # Given up at the timeout, long before the 60 s read would end, however busy the machine.
        assert ticket.wait(30) and ticket.outcome == "timeout"
        assert time.perf_counter() - t0 < 30
        assert pool.state("draft-copy") == DraftState.ON_STORAGE and pool.used_bytes() == 0
        assert failures and failures[0].outcome == "timeout" and "timed out" in pool.last_error("draft-copy")
    finally:
        loader.close()


def test_corrupt_and_missing_files_fail_cleanly(world, tmp_path) -> None:
    cat, dirs = world.fresh_catalogue(tmp_path)
    weights = dirs["draft-code"] / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[8:200] = b"\x00" * 192  # wreck the JSON header, keep the size
    weights.write_bytes(bytes(data))
    (dirs["draft-math"] / "model.safetensors").unlink()
    failures = []
    pool, loader = _pool_loader(cat, on_failure=failures.append)
    try:
        for name in ("draft-code", "draft-math"):
            ticket = loader.request(name)
            assert ticket.wait(30) and ticket.outcome == "failed", ticket
            assert pool.state(name) == DraftState.ON_STORAGE
            assert pool.failures(name) == 1 and pool.last_error(name)
        assert pool.used_bytes() == 0
        assert {f.name for f in failures} == {"draft-code", "draft-math"}
        assert loader.request("draft-robot").wait(30) and pool.state("draft-robot") == DraftState.RESIDENT
    finally:
        loader.close()
