"""The server's processes as the fault injector sees them: python backend stubs per model
instance, signals to one process, and what is left behind after a kill.

On this host the stubs are found among the server's descendants with psutil; a stub's command
line carries the model file (`.../<model>/<version>/model.py`) and the instance name
(`<model>_<group>_<index>`). A launcher that runs the server elsewhere (a container) answers
the same questions through its own `stub_pids(model)` and `signal_process(pid, sig)`.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import psutil

STUB_NAME = "triton_python_backend_stub"
_INSTANCE = re.compile(r"^(?P<model>.+)_\d+_\d+$")


@dataclass(frozen=True)
class StubProcess:
    """One python backend stub: the process serving one instance of one model."""

    pid: int
    model: str
    instance: str


def _stub_of(cmdline: list[str]) -> tuple[str, str] | None:
    """(model, instance) from a stub's command line, or None when it is not a stub."""
    if not cmdline or STUB_NAME not in PurePosixPath(cmdline[0]).name:
        return None
    model_file = next((a for a in cmdline[1:] if a.endswith(".py")), "")
    parts = PurePosixPath(model_file).parts
    model = parts[-3] if len(parts) >= 3 else ""
    instance = next((a for a in cmdline[2:] if _INSTANCE.match(a)), "")
    if not model and instance:
        model = _INSTANCE.match(instance).group("model")
    return model, instance or "?"


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def local_stubs(server_pid: int, model: str | None = None) -> list[StubProcess]:
    """Live stubs among the descendants of `server_pid` (of `model`, or all), sorted by instance."""
    try:
        children = psutil.Process(server_pid).children(recursive=True)
    except psutil.Error:
        return []
    stubs = []
    for child in children:
        if not _alive(child):
            continue
        try:
            found = _stub_of(child.cmdline())
        except psutil.Error:
            continue
        if found and (model is None or found[0] == model):
            stubs.append(StubProcess(child.pid, *found))
    return sorted(stubs, key=lambda s: s.instance)


def process_tree(pid: int) -> list[int]:
    """`pid` and every live descendant."""
    try:
        root = psutil.Process(pid)
        return [pid] + [c.pid for c in root.children(recursive=True) if _alive(c)]
    except psutil.Error:
        return []


def still_running(pids: list[int]) -> list[int]:
    """The pids of `pids` that still run (zombies count as gone: they hold no resources but a slot)."""
    left = []
    for pid in pids:
        try:
            if _alive(psutil.Process(pid)):
                left.append(pid)
        except psutil.Error:
            continue
    return left


class ServerProcesses:
    """Process control over the server a launcher owns: stubs, signals, exit."""

    def __init__(self, launcher: Any) -> None:
        self.launcher = launcher

    @property
    def local(self) -> bool:
        """True when the server's processes are on this host (psutil can see them)."""
        return getattr(self.launcher, "process", None) is not None

    def stubs(self, model: str) -> list[StubProcess]:
        if self.local and self.launcher.pid:
            return local_stubs(self.launcher.pid, model)
        if hasattr(self.launcher, "stub_pids"):
            return [StubProcess(pid, model, "?") for pid in self.launcher.stub_pids(model)]
        return []

    def signal(self, pid: int, sig: int) -> None:
        if self.local:
            os.kill(pid, sig)
        elif hasattr(self.launcher, "signal_process"):
            self.launcher.signal_process(pid, sig)
        else:
            raise RuntimeError(f"the {getattr(self.launcher, 'name', '?')} launcher cannot signal a process")

    def terminate_server(self) -> None:
        """SIGTERM the server process only (what an orchestrator does), not its whole group."""
        if self.local:
            os.kill(self.launcher.pid, signal.SIGTERM)
        else:
            self.signal(1, signal.SIGTERM)  # tritonserver is PID 1 of its container

    def exit_code(self) -> int | None:
        """The server's exit code once it exited, None while it runs."""
        process = getattr(self.launcher, "process", None)
        if process is not None:
            return process.poll()
        if hasattr(self.launcher, "running") and not self.launcher.running():
            return self.launcher._state().get("ExitCode")
        return None

    def tree(self) -> list[int]:
        return process_tree(self.launcher.pid) if self.local and self.launcher.pid else []
