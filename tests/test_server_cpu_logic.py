"""The server's CPU over a load point (performance/server_cpu.py), read from a real process tree of this host."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import psutil

from pytest_triton_ready.performance.server_cpu import ServerCpu


def _target(pid, readable=True):
    launcher = SimpleNamespace(pid=pid, capabilities=SimpleNamespace(can_read_process_memory=readable))
    return SimpleNamespace(launcher=launcher)


def test_a_busy_child_process_counts_and_an_unreadable_server_is_none():
    busy = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                                                     f"{busy!r}])"])
    try:
        time.sleep(0.5)  # the child is running
        cpu = ServerCpu(_target(parent.pid))
        cpu.start()
        time.sleep(1.0)
        cores = cpu.cores()
        assert cores is not None and 0.2 < cores <= 1.2  # one spinning child: up to one core of a busy host
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()
    unreadable = ServerCpu(_target(parent.pid, readable=False))
    unreadable.start()
    assert unreadable.cores() is None
    attached = ServerCpu(SimpleNamespace())
    attached.start()
    assert attached.cores() is None
