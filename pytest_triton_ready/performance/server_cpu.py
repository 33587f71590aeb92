"""The CPU the server's process tree used while a load point was measured, in cores: what a pod's
CPU limit must allow for the capacity measured at that point to hold. Read with psutil where the
server is a process of this host (the launcher says so); None elsewhere (an attached server)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import psutil

from ..launchers.process import tree_processes

if TYPE_CHECKING:
    from ..server.under_test import ServerUnderTest


def _tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its live descendants (the python backend stubs)."""
    total = 0.0
    for process in tree_processes(pid):
        try:
            times = process.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += times.user + times.system
    return total


class ServerCpu:
    """`start()` before a measurement, `cores()` after it: the server's CPU over that span."""

    def __init__(self, target: ServerUnderTest) -> None:
        launcher = getattr(target, "launcher", None)
        readable = launcher is not None and launcher.capabilities.can_read_process_memory
        self._pid = (lambda: launcher.pid) if readable else (lambda: None)
        self._started: tuple[int, float, float] | None = None

    def start(self) -> None:
        pid = self._pid()
        try:
            self._started = (pid, _tree_cpu_s(pid), time.monotonic()) if pid is not None else None
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            self._started = None

    def cores(self) -> float | None:
        """Cores used since `start()`; None where unreadable or the server was replaced meanwhile."""
        if self._started is None or self._pid() != self._started[0]:
            return None
        pid, cpu_s, at = self._started
        try:
            used = _tree_cpu_s(pid) - cpu_s
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        span = time.monotonic() - at
        return round(used / span, 3) if span > 0 and used >= 0 else None
