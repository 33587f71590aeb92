"""CFG-4's readings: GPU memory per GPU, host memory, and the pinned memory pool.

Pure functions over GpuReadings and a MetricsSnapshot, so the H200 captures in
shared/data/h200-triton-2.51 serve as fixtures as well as a live server does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryUse:
    """One memory pool at one instant: who, used and total bytes."""

    label: str
    used_bytes: float
    total_bytes: float

    @property
    def fraction(self) -> float:
        return self.used_bytes / self.total_bytes


def gpu_memory_use(readings) -> list[MemoryUse]:
    """Memory use of each GPU that reports both used and total memory."""
    return [MemoryUse(f"GPU {r.index} ({r.uuid})", r.memory_used_bytes, r.memory_total_bytes)
            for r in readings if r.memory_used_bytes is not None and r.memory_total_bytes]


def gpus_over(uses: list[MemoryUse], max_fraction: float) -> list[MemoryUse]:
    """The GPUs whose memory use is above `max_fraction` of their total."""
    return [use for use in uses if use.fraction > max_fraction]


def host_memory_use(snapshot) -> MemoryUse | None:
    """Host memory from nv_cpu_memory_used_bytes / nv_cpu_memory_total_bytes; None when absent."""
    used, total = snapshot.select("nv_cpu_memory_used_bytes"), snapshot.select("nv_cpu_memory_total_bytes")
    if not used or not total or not total[0].value:
        return None
    return MemoryUse("host", used[0].value, total[0].value)


def pinned_pool_bytes(snapshot) -> float | None:
    """nv_pinned_memory_pool_total_bytes; None when the server does not export it."""
    samples = snapshot.select("nv_pinned_memory_pool_total_bytes")
    return samples[0].value if samples else None


FIRST_POLL_TIMEOUT_S = 5.0  # Triton's default --metrics-interval-ms is 2000


def polled_snapshot(scrape, timeout_s: float = FIRST_POLL_TIMEOUT_S):
    """A snapshot taken after Triton's metrics poller has run once.

    Right after start-up Triton exports nv_cpu_memory_*_bytes and nv_pinned_memory_pool_total_bytes
    as 0 until its first poll; a host always has memory, so a total of 0 means "not polled yet".
    """
    deadline = time.monotonic() + timeout_s
    while True:
        snapshot = scrape()
        total = snapshot.select("nv_cpu_memory_total_bytes")
        if not total or total[0].value > 0 or time.monotonic() > deadline:
            return snapshot
        time.sleep(0.25)
