"""Process-group handling shared by launchers that run a server process on this host.

A server runs in its own session (process group). Stopping ends the whole group, so no python
backend stub is left behind, and the group is also ended when the runner exits or dies.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Sequence

_LIVE_GROUPS: set[int] = set()
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A TCP port on loopback nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def spawn(argv: Sequence[str], env: dict[str, str], log: IO[bytes]) -> subprocess.Popen:
    """Start `argv` in a new process group that dies with this process.

    The kernel ties the parent-death signal to the thread that forked, so it is armed only from
    the main thread; a server started from a worker thread is still ended at exit (atexit)."""
    from_main_thread = threading.current_thread() is threading.main_thread()
    process = subprocess.Popen(
        list(argv), env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=_die_with_parent if from_main_thread else None,
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
