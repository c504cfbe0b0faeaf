"""Reading weight files from storage, optionally at an emulated device's bandwidth.

An edge device reads model files far slower than this machine's page cache (the paper's
regime: loading a draft costs ~2.7 decoding rounds). To reproduce that regime honestly the
bytes are *really read*, chunk by chunk, and the reader sleeps between chunks so that the
cumulative rate never exceeds the configured bandwidth. Nothing is skipped or faked: a
slower device simply takes longer to deliver the same bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CHUNK_BYTES = 256 * 1024


class LoadCancelled(Exception):
    """The read was abandoned because the load was cancelled."""


class LoadTimedOut(Exception):
    """The read did not finish before its deadline."""


@dataclass(frozen=True)
class StorageModel:
    """How fast storage delivers bytes: ``None`` bandwidth = as fast as the machine can.

    ``latency_s`` is a fixed cost per file opened (seek/queue time of a real device).
    """

    bandwidth_bytes_per_s: float | None = None
    latency_s: float = 0.0
    chunk_bytes: int = DEFAULT_CHUNK_BYTES

    def __post_init__(self) -> None:
        if self.bandwidth_bytes_per_s is not None and self.bandwidth_bytes_per_s <= 0:
            raise ValueError("storage bandwidth must be > 0 (or None for unthrottled)")
        if self.chunk_bytes <= 0:
            raise ValueError("chunk size must be > 0")

    @classmethod
    def mb_per_s(cls, mb: float | None, latency_s: float = 0.0) -> StorageModel:
        """A storage model of ``mb`` MB/s (10^6 bytes), or unthrottled for ``None``/0."""
        return cls(bandwidth_bytes_per_s=mb * 1e6 if mb else None, latency_s=latency_s)

    def nominal_seconds(self, nbytes: int, files: int = 1) -> float:
        """Time this storage needs to deliver ``nbytes`` (0 when unthrottled)."""
        if self.bandwidth_bytes_per_s is None:
            return 0.0
        return files * self.latency_s + nbytes / self.bandwidth_bytes_per_s


def read_files(
    paths: Sequence[Path],
    storage: StorageModel,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    wait: Callable[[float], bool] | None = None,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[bytearray]:
    """Read ``paths`` completely, pacing to ``storage``; return one blob per file.

    Each blob is the buffer the file was read into, not a copy of it: a load's transient
    memory is the file's bytes once.

    ``wait(seconds)`` sleeps and returns True if the load was cancelled meanwhile (so a
    cancel interrupts a paced read at once); ``on_progress(done, total)`` is called after every
    chunk; ``deadline`` (clock time) raises :class:`LoadTimedOut` when passed.
    """
    wait = wait or (lambda s: time.sleep(s) or False)
    sizes = [Path(p).stat().st_size for p in paths]
    total = sum(sizes)
    done = 0
    start = clock()
    paced_until = start
    blobs: list[bytearray] = []
    for path, size in zip(paths, sizes, strict=True):
        buf = bytearray(size)
        view = memoryview(buf)
        with open(path, "rb") as fh:
            if storage.bandwidth_bytes_per_s is not None and storage.latency_s > 0:
                paced_until += storage.latency_s
            pos = 0
            while pos < size:
                n = fh.readinto(view[pos: pos + storage.chunk_bytes])
                if not n:
                    raise OSError(f"{path}: file shrank while being read ({pos} of {size} bytes)")
                pos += n
                done += n
                if storage.bandwidth_bytes_per_s is not None:
                    paced_until += n / storage.bandwidth_bytes_per_s
                    delay = paced_until - clock()
                    if deadline is not None and paced_until > deadline:
                        if wait(max(0.0, deadline - clock())):
                            raise LoadCancelled()
                        raise LoadTimedOut()
                    if delay > 0 and wait(delay):
                        raise LoadCancelled()
                elif wait(0.0):
                    raise LoadCancelled()
                if deadline is not None and clock() > deadline:
                    raise LoadTimedOut()
                if on_progress is not None:
                    on_progress(done, total)
        view.release()
        blobs.append(buf)
    return blobs
