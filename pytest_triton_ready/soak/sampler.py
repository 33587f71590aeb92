"""Server-side and runner-side readings taken at the end of every soak window.

Each reading is independent: one that cannot be taken is None with a note saying why, and the
others still count. Triton's nv_cpu_memory_used_bytes is the *host's* used memory (Triton reads
/proc/meminfo), so it is a server signal only where the server has its host to itself; the RSS of
the server's process tree (tritonserver and its python backend stubs) is read when the runner owns
the server process. A server in a container is read as the container's memory from the engine's
stats (what `docker stats` shows) where the engine reports it; where it does not (no memory
cgroup), the reading says why and the process tree's RSS is read instead when its pid is local.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from ..launchers.process import tree_processes
from ..server.metrics import MetricsError, MetricsSnapshot


@dataclass
class Reading:
    pending_requests: float | None = None
    host_memory_used_bytes: float | None = None
    server_rss_bytes: float | None = None
    gpu_memory_used_bytes: float | None = None
    gpu_utilization: float | None = None
    runner_rss_bytes: float | None = None
    notes: list[str] = field(default_factory=list)


def rss_of(processes: list[psutil.Process], leave_out: set[int] = frozenset()) -> float:
    """Summed RSS in bytes; processes that ended meanwhile count as nothing."""
    total = 0.0
    for process in processes:
        if process.pid in leave_out:
            continue
        try:
            total += process.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


class Sampler:
    """Takes one Reading: metrics scrape, server process tree, GPUs, and this runner."""

    def __init__(self, scrape: Callable[[], MetricsSnapshot], models: list[str], server_pid: Callable[[], int | None],
                 gpu=None, server_memory: Callable[[], tuple[float | None, str | None]] | None = None) -> None:
        self._scrape = scrape
        self._server_memory = server_memory
        self._models = list(models)
        self._server_pid = server_pid
        self._gpu = gpu
        self._runner = psutil.Process()

    def read(self) -> Reading:
        reading = Reading()
        try:
            snapshot = self._scrape()
        except MetricsError as exc:
            reading.notes.append(f"metrics: {exc}")
        else:
            pending = [s.value for s in snapshot.select("nv_inference_pending_request_count")
                       if s.labels.get("model") in self._models]
            reading.pending_requests = sum(pending) if pending else None
            used = snapshot.select("nv_cpu_memory_used_bytes")
            # Triton publishes 0 until its first CPU-metrics poll; that is "not read yet", not 0 bytes.
            if used and used[0].value > 0:
                reading.host_memory_used_bytes = used[0].value
        server: list[psutil.Process] = []
        if self._server_memory is not None:
            reading.server_rss_bytes, why = self._server_memory()
            if why:
                reading.notes.append(why)
        pid = self._server_pid()
        if pid is not None and reading.server_rss_bytes is None:
            try:
                server = tree_processes(pid)
                reading.server_rss_bytes = rss_of(server)
            except (psutil.NoSuchProcess, psutil.AccessDenied) as exc:
                reading.notes.append(f"server RSS: {type(exc).__name__} for pid {pid}")
        # The runner: this process and its helpers, but not a server it launched (its child too).
        runner = tree_processes(self._runner.pid)
        reading.runner_rss_bytes = rss_of(runner, leave_out={p.pid for p in server})
        if self._gpu is not None:
            gpus = self._gpu.read()
            used = [g.memory_used_bytes for g in gpus if g.memory_used_bytes is not None]
            busy = [g.utilization for g in gpus if g.utilization is not None]
            reading.gpu_memory_used_bytes = sum(used) if used else None
            reading.gpu_utilization = sum(busy) / len(busy) if busy else None
            if not gpus and self._gpu.unavailable_reason:
                reading.notes.append(f"GPU: {self._gpu.unavailable_reason}")
        return reading
