"""Process-group handling shared by launchers that run a server process on this host.

A server runs in its own session (process group). Stopping ends the whole group, so no python
backend stub is left behind, and the group is also ended when the runner exits or dies, whichever
thread started it.

How a group is ended when the runner dies (SIGKILL included): the reaper
-----------------------------------------------------------------------
`PR_SET_PDEATHSIG` is not enough: the kernel sends the parent-death signal when the *thread* that
forked the child ends, not the process, so a server started from a short-lived thread would die
with that thread, and one started from any thread but the main one could not use it at all.
Instead, the first `spawn` starts one small reaper process per runner (`python -c _REAPER_CODE`,
in a session of its own so that a Ctrl-C or a kill of the runner's process group does not reach
it). The runner keeps the write end of a pipe whose read end only the reaper holds (the runner's
end is close-on-exec, so no child inherits it). Each spawned server registers its own process
group on that pipe from the forked child, before it execs (`preexec_fn`), so there is no moment
in which a server runs unregistered; `end_group` unregisters it. When the runner ends in any way
(exit, exception, SIGKILL, OOM kill), the kernel closes its end of the pipe; the reaper reads EOF
and SIGKILLs every group still registered, then exits. This does not depend on which thread
spawned the server nor on the thread living on. The parent-death signal is still armed for a
server started from the main thread, as a second line, and `atexit` ends the groups on a normal
exit without waiting for the reaper.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

import psutil

_LIVE_GROUPS: set[int] = set()
_PR_SET_PDEATHSIG = 1

STUB_NAME = "triton_python_backend_stub"
_INSTANCE = re.compile(r"^(?P<model>.+)_\d+_\d+$")


def free_port() -> int:
    """A TCP port on loopback nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Arm the parent-death signal for the calling process (Linux; a no-op elsewhere). Tied to the
    thread that forked this process: it fires when that thread ends."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass


# -- the reaper ---------------------------------------------------------------------------------
_REAPER_CODE = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
fd = int(sys.argv[1])
groups = set()
buffer = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except InterruptedError:
        continue
    if not chunk:
        break
    buffer += chunk
    *lines, buffer = buffer.split(b"\n")
    for line in lines:
        verb, _, pgid = line.decode().partition(" ")
        if verb == "add":
            groups.add(int(pgid))
        elif verb == "del":
            groups.discard(int(pgid))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class _Reaper:
    """The runner's side of the reaper: the write end of its pipe (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._owner_pid: int | None = None
        self.process: subprocess.Popen | None = None

    def fd(self) -> int | None:
        """The write end, starting the reaper on first use (and again in a forked child)."""
        with self._lock:
            if self._fd is not None and self._owner_pid == os.getpid() and self.process.poll() is None:
                return self._fd
            read_end, write_end = os.pipe()  # both close-on-exec
            try:
                self.process = subprocess.Popen(
                    [sys.executable, "-S", "-c", _REAPER_CODE, str(read_end)], pass_fds=(read_end,),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True)
            except OSError:
                os.close(write_end)
                return None
            finally:
                os.close(read_end)
            self._fd, self._owner_pid = write_end, os.getpid()
            return self._fd

    def tell(self, verb: str, pgid: int) -> None:
        fd = self._fd if self._owner_pid == os.getpid() else None
        if fd is not None:
            try:
                os.write(fd, f"{verb} {pgid}\n".encode())
            except OSError:
                pass


_REAPER = _Reaper()


def reaper_pid() -> int | None:
    """The reaper's pid, once started (for tests)."""
    return _REAPER.process.pid if _REAPER.process is not None else None


def spawn(argv: Sequence[str], env: dict[str, str], log: IO[bytes]) -> subprocess.Popen:
    """Start `argv` in a new process group that is ended when this process ends or dies, from
    whichever thread it is called (see the module docstring)."""
    fd = _REAPER.fd()
    from_main_thread = threading.current_thread() is threading.main_thread()

    def in_child() -> None:  # runs in the forked child, after setsid, before exec
        if fd is not None:
            os.write(fd, f"add {os.getpid()}\n".encode())
        if from_main_thread:
            die_with_parent()

    process = subprocess.Popen(
        list(argv), env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=in_child,
    )
    _LIVE_GROUPS.add(process.pid)
    return process


def end_group(process: subprocess.Popen, grace_s: float = 10.0, sig: int = signal.SIGTERM) -> int | None:
    """Signal the whole group, wait up to `grace_s`, then SIGKILL what is left. Returns the exit code."""
    pgid = process.pid
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    kill_group(pgid, process)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    _LIVE_GROUPS.discard(pgid)
    _REAPER.tell("del", pgid)
    return process.returncode


def kill_group(pgid: int, leader: subprocess.Popen | None = None) -> None:
    """SIGKILL every process left in the group and wait until none remains (at most 5 s).

    The group leader is reaped on the way (`leader.poll()`): an unreaped leader stays a zombie
    member of its group, and the group would look alive until the deadline."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        if leader is not None:
            leader.poll()
        time.sleep(0.05)


def log_tail(path: Path, max_lines: int = 200) -> str:
    """The last lines of a server log file ('' when it cannot be read)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-max_lines:])


def last_error_line(log: str) -> str:
    """The newest line of a server log that reports an error."""
    for line in reversed(log.splitlines()):
        if line.startswith(("E", "error")) or "error:" in line:
            return line.strip()
    return "no error line in the server log"


@atexit.register
def _end_all_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        kill_group(pgid)
        _REAPER.tell("del", pgid)


# -- the server's processes on this host ---------------------------------------------------------
@dataclass(frozen=True)
class StubProcess:
    """One python backend stub: the process serving one instance of one model."""

    pid: int
    model: str
    instance: str


def stub_of(cmdline: list[str]) -> tuple[str, str] | None:
    """(model, instance) from a stub's command line, or None when it is not a stub. The first
    argument is the model file (`.../<model>/<version>/model.py`), a later one the instance name
    (`<model>_<group>_<index>`)."""
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
            found = stub_of(child.cmdline())
        except psutil.Error:
            continue
        if found and (model is None or found[0] == model):
            stubs.append(StubProcess(child.pid, *found))
    return sorted(stubs, key=lambda s: s.instance)


def tree_processes(pid: int) -> list[psutil.Process]:
    """The one process-tree reader: the process `pid` and every live descendant (the python
    backend stubs), as psutil processes; psutil.NoSuchProcess when `pid` itself is gone."""
    root = psutil.Process(pid)
    return [root, *(child for child in root.children(recursive=True) if _alive(child))]


def process_tree(pid: int) -> list[int]:
    """The pids of `pid` and every live descendant (empty when `pid` is gone)."""
    try:
        return [process.pid for process in tree_processes(pid)]
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
