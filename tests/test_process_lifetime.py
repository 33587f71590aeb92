"""Nothing outlives the runner: a runner subprocess is really SIGKILLed and psutil must find none
of its load workers, none of its tritonserver processes (nor stubs), and no reaper a few seconds
later. A server started from a short-lived thread lives on until the runner dies. A start-up that
fails leaves no process group, log handle or working directory behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from pytest_triton_ready.launchers import LaunchError
from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY, EmbeddedLauncher

GONE_WITHIN_S = 10.0


def _runner(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _line(runner: subprocess.Popen, prefix: str, timeout_s: float = 120.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = runner.stdout.readline()
        if line.startswith(prefix):
            return line[len(prefix):].strip()
        if not line and runner.poll() is not None:
            break
    runner.kill()
    raise AssertionError(f"the runner never printed {prefix!r}: {runner.stderr.read()[-2000:]}")


def _alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.Error:
            pass
    return left


def _wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + GONE_WITHIN_S
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _alive(pids)


def _sigkill(runner: subprocess.Popen) -> None:
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(10)


@pytest.mark.parametrize("thread", ["main", "short-lived thread"])
def test_a_server_started_from_any_thread_ends_when_the_runner_is_killed(thread):
    runner = _runner(f"""
        import threading, time
        from pytest_triton_ready.launchers.embedded import EmbeddedLauncher
        from pytest_triton_ready.launchers.process import reaper_pid
        launcher = EmbeddedLauncher()
        if {thread == "main"!r}:
            launcher.start()
        else:
            starter = threading.Thread(target=launcher.start)
            starter.start()
            starter.join()  # the thread that forked the server is gone from here on
        time.sleep(1.0)
        print("server", launcher.pid, reaper_pid(), flush=True)
        time.sleep(600)
    """)
    try:
        server, reaper = (int(p) for p in _line(runner, "server ").split())
        tree = [server] + [c.pid for c in psutil.Process(server).children(recursive=True)]
        assert len(tree) >= 5, "the server and its four python backend stubs"
        assert not [p for p in tree if p not in _alive(tree)], "the server outlived the thread that started it"
        _sigkill(runner)
        assert _wait_gone(tree + [reaper]) == [], "processes of the killed runner's server are left"
    finally:
        if runner.poll() is None:
            runner.kill()


def test_load_workers_end_when_the_runner_is_killed(demo_server):
    endpoints = demo_server.endpoints
    runner = _runner(f"""
        import threading
        from pytest_triton_ready.server.client import TritonClient
        from pytest_triton_ready.load import LoadEngine
        client = TritonClient({endpoints.http_url!r}, {endpoints.grpc_url!r})
        engine = LoadEngine(client, {endpoints.grpc_url!r}, {endpoints.http_url!r}, {{}})
        print("measuring", flush=True)
        engine.measure("scale", rate=10, workers=2)
    """)
    try:
        _line(runner, "measuring")
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while len(workers) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = [c.pid for c in psutil.Process(runner.pid).children()
                       if "spawn_main" in " ".join(c.cmdline())]
        assert len(workers) == 2, "two load worker processes"
        _sigkill(runner)
        assert _wait_gone(workers) == [], "load workers outlived the killed runner"
    finally:
        if runner.poll() is None:
            runner.kill()


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("why", ["exits at start-up", "start-up timeout"])
def test_a_failed_start_leaves_no_group_log_handle_or_working_directory(why):
    if why == "exits at start-up":
        launcher = EmbeddedLauncher(DEMO_REPOSITORY, extra_args=["--no-such-option"])
        expected = "tritonserver exited with code"
    else:
        launcher = EmbeddedLauncher(DEMO_REPOSITORY, startup_timeout_s=0.5)
        expected = "tritonserver was not ready within 0 s"
    try:
        with pytest.raises(LaunchError, match=expected):
            launcher.start()
        pgid = launcher.pid
        assert pgid is not None and _group_gone(pgid)
        assert launcher._log is None
        assert not launcher.workdir.exists()
        if why == "exits at start-up":
            assert "no-such-option" in launcher.log_text(10**6)  # the log's text outlives its directory
    finally:
        launcher.cleanup()
