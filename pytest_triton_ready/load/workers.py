"""Worker processes, for when one Python process cannot drive the server: the load is split
across processes (concurrency or rate divided), each runs its own event loop and transport, and
their windows are merged in the parent by window index (HdrHistograms travel encoded).

Windows line up because every worker starts at the same wall-clock instant, chosen by the parent
once all of them are ready; the parent reads the server's statistics at the windows' edges on that
clock. It decides when to stop (stability, validity, max windows) and tells all workers at once.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..addresses import host_of, is_loopback
from .background import new_loop
from .senders import make_sender
from .server_side import ServerWindow, window_delta
from .stats import Tally
from .traffic import Traffic, TrafficPlan, TrafficResult, Window
from .window_recorder import Sighting, summarize

IN_FLIGHT_PER_WORKER = 32
RATE_PER_WORKER = 4000.0
START_DELAY_S = 0.2  # from the last worker ready to the shared start
EDGE_WAIT_S = 5.0  # how long a closed window waits for the server's snapshot at its closing edge


def auto_workers(concurrency: int | None = None, rate: float | None = None, cores: int | None = None,
                 server_here: bool = True) -> int:
    """How many processes to use: one per 32 requests in flight (or 4000 requests/s), within the
    client host's spare cores (spare_cores), at least one."""
    limit = spare_cores(cores if cores is not None else usable_cores(), server_here)
    need = math.ceil((concurrency or 0) / IN_FLIGHT_PER_WORKER) if concurrency else math.ceil((rate or 0) / RATE_PER_WORKER)
    return max(1, min(limit, need))


def on_this_host(target: str | None) -> bool:
    """Whether the server at `target` (a URL or host:port) runs on this host: a loopback address,
    or this host's own name. Unknown (None) counts as here, the cautious split."""
    if not target:
        return True
    host = host_of(target)
    return not host or is_loopback(host) or host == socket.gethostname()


def spare_cores(cores: int, server_here: bool) -> int:
    """The cores load workers may take: half of them when the server runs on this host too (the
    other half is its own), else all but one (the parent reads the server and merges the windows)."""
    return max(1, cores // 2 if server_here else cores - 1)


def usable_cores(cgroup_root: str = "/sys/fs/cgroup") -> int:
    """The cores this process may run on: its CPU affinity (sched_getaffinity: what taskset or a
    container's cpuset leaves it), lowered to the cgroup's CPU quota where one is set (cgroup v2
    cpu.max, v1 cpu.cfs_quota_us: a pod's CPU limit), rounded up, at least one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_cpu_quota(cgroup_root)
    return max(1, min(cores, math.ceil(quota))) if quota else max(1, cores)


def cgroup_cpu_quota(root: str = "/sys/fs/cgroup", membership: str = "/proc/self/cgroup") -> float | None:
    """The CPUs this process's cgroup may use per period (quota / period), or None without a limit:
    cgroup v2's cpu.max, else v1's cpu.cfs_quota_us / cpu.cfs_period_us, in this process's own
    cgroup (from `membership`) and else at the root (a container sees its own cgroup as the root)."""
    own = {"v2": "/", "v1": "/"}
    try:
        for line in Path(membership).read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if not controllers:
                own["v2"] = path or "/"
            elif "cpu" in controllers.split(","):
                own["v1"] = path or "/"
    except (OSError, ValueError):
        pass
    base = Path(root)
    for directory in dict.fromkeys((base / own["v2"].lstrip("/"), base)):
        try:
            quota, period = (directory / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        except (OSError, ValueError):
            continue
    for mount in ("cpu", "cpu,cpuacct"):
        for directory in dict.fromkeys((base / mount / own["v1"].lstrip("/"), base / mount)):
            try:
                quota_us = int((directory / "cpu.cfs_quota_us").read_text())
                period_us = int((directory / "cpu.cfs_period_us").read_text())
            except (OSError, ValueError):
                continue
            return quota_us / period_us if quota_us > 0 and period_us > 0 else None
    return None


def split(total: float, parts: int, integer: bool) -> list[float]:
    if integer:
        base, extra = divmod(int(total), parts)
        return [base + (1 if i < extra else 0) for i in range(parts)]
    return [total / parts] * parts


_PR_SET_PDEATHSIG = 1


def die_with_runner(runner_pid: int | None) -> None:
    """A worker ends when the runner that started it dies, SIGKILL included.

    The kernel's parent-death signal (prctl PR_SET_PDEATHSIG) SIGKILLs this process when the
    runner's thread that started it ends (run_in_workers joins its workers before it returns, so
    that thread outlives them). The runner may already have died before the signal was armed:
    then the parent pid is no longer the runner's, and the worker exits at once. A watch thread
    checks the parent pid twice a second as well, for kernels without prctl."""
    if runner_pid is None:
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != runner_pid:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == runner_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="runner-watch", daemon=True).start()


def _worker_main(index: int, plan: TrafficPlan, transport: dict, start: Any, out: Any, stop: Any,
                 runner_pid: int | None = None) -> None:
    die_with_runner(runner_pid)

    async def run() -> None:
        sender = make_sender(transport["protocol"], transport["grpc_url"], transport["http_url"],
                             transport["headers"], transport["timeout_s"], transport["in_flight"])
        out.put(("ready", index))
        while not start.go.wait(0.1):
            if stop.is_set():
                await sender.close()
                return

        def on_window(window: Window, tallies: dict[str, Tally]) -> None:
            out.put(("window", index, window.index, window.start_s, window.end_s,
                     {m: t.to_wire() for m, t in tallies.items()}))

        traffic = Traffic(plan, sender, on_window=None)
        traffic.on_tallies = on_window
        traffic.counter_base = (traffic.counter_base + index * (1 << 20)) % (1 << 24)
        threading.Thread(target=lambda: (stop.wait(), traffic.stop()), daemon=True).start()
        delay = start.at.value - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        out.put(("started", index, time.time()))
        result = await traffic.run()
        out.put(("done", index, {m: t.to_wire() for m, t in _overall(traffic).items()}, result.in_flight_at_stop,
                 {m: {r: x.__dict__ for r, x in by.items()} for m, by in result.sightings.items()},
                 result.timed_out, result.completed))

    try:
        loop = new_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(run())
        finally:  # what asyncio.run does on the way out
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()
    except BaseException as exc:  # reported to the parent, which raises it
        out.put(("error", index, f"{type(exc).__name__}: {exc}"))


def _overall(traffic: Traffic) -> dict[str, Tally]:
    return traffic.recorder.overall


class WorkerProcesses:
    """Spawned load workers and the one queue they report on. `target(index, *args, start, out,
    stop, runner_pid)` runs in each; every worker reports ("ready", index) once it can send, then
    all start at one instant (`StartSignal`), and each ends with ("done", index, ...) or ("error",
    index, text). `messages()` yields every other message, and ("go", start_at) once all are ready;
    the first error stops them all. As a context manager it starts them, and at the end stops them,
    ended or killed."""

    def __init__(self, target: Callable[..., None], args: list[tuple], max_wait_s: float) -> None:
        context = multiprocessing.get_context("spawn")
        self.out = context.Queue()
        self.stop = context.Event()
        self.start = StartSignal(context)
        self.processes = [context.Process(target=target, args=(i, *a, self.start, self.out, self.stop, os.getpid()),
                                          daemon=True) for i, a in enumerate(args)]
        self.deadline = time.time() + max_wait_s + START_DELAY_S
        self.finals: dict[int, tuple] = {}
        self.errors: list[str] = []

    def __enter__(self) -> WorkerProcesses:
        for process in self.processes:
            process.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        for process in self.processes:
            process.join(10)
            if process.is_alive():
                process.terminate()
                process.join(5)

    def messages(self) -> Iterator[tuple]:
        ready: set[int] = set()
        workers = len(self.processes)
        while len(self.finals) + len(self.errors) < workers and time.time() < self.deadline:
            try:
                message = self.out.get(timeout=0.5)
            except queue.Empty:
                if not any(p.is_alive() for p in self.processes):
                    return
                continue
            kind = message[0]
            if kind == "ready":
                ready.add(message[1])
                if len(ready) == workers:  # every worker has its transport: all start at one instant
                    yield ("go", self.start.give(START_DELAY_S))
            elif kind == "error":
                self.errors.append(message[2])
                self.stop.set()
            elif kind == "done":
                self.finals[message[1]] = message[2:]
            else:
                yield message


def run_in_workers(plan: TrafficPlan, workers: int, transport: dict, probe: Any = None,
                   stop_when: Callable[[list[Window]], bool] | None = None,
                   max_wait_s: float = 3600.0) -> TrafficResult:
    """Run `plan` split across `workers` processes; windows merged, `stop_when` decided here."""
    shares = []
    for i in range(workers):
        share = TrafficPlan(**{**plan.__dict__})
        share.bin_s = None
        if plan.mode == "closed":
            share.concurrency = {m: int(split(n, workers, True)[i]) for m, n in plan.concurrency.items()}
        else:
            share.rates = {m: split(r, workers, False)[i] for m, r in plan.rates.items()}
        shares.append(share)
    pool = WorkerProcesses(_worker_main, [(share, {**transport, "in_flight": max(
        1, sum(share.concurrency.values()) or plan.max_in_flight)}) for share in shares], max_wait_s)
    edges = None
    assembler = WindowAssembler(workers, plan, None)
    started: dict[int, float] = {}
    started_mono = time.monotonic()
    with pool:
        for message in pool.messages():
            kind = message[0]
            if kind == "go":
                start_at = message[1]
                started_mono = time.monotonic() + (start_at - time.time())
                if plan.duration_s is not None:
                    threading.Timer(max(0.0, start_at - time.time()) + plan.warmup_s + plan.duration_s,
                                    pool.stop.set).start()
            elif kind == "started":
                started[message[1]] = message[2]
                if len(started) == workers and probe is not None and plan.window_s:
                    first_edge = sum(started.values()) / workers + plan.warmup_s
                    edges = assembler.edges = EdgeSnapshots(probe, first_edge, plan.window_s, pool.stop)
                    edges.start()
            elif kind == "window":
                _, worker, index, begin, end, wire = message
                if assembler.add(worker, index, begin, end, wire) and stop_when is not None \
                        and stop_when(assembler.windows):
                    pool.stop.set()
        pool.stop.set()
        if edges is not None:
            edges.join(5)
    errors, finals = pool.errors, pool.finals
    if errors:
        raise RuntimeError(f"a load worker failed: {errors[0]}")
    ended = time.monotonic()
    overall = _merge_parts([f[0] for f in finals.values()])
    duration = max(0.0, ended - started_mono - plan.warmup_s)
    stats, by_model = summarize(overall, duration)
    return TrafficResult(stats, by_model, assembler.windows, None, assembler.recent, plan.mode, started_mono, ended,
                         sum(f[1] for f in finals.values()), _merge_sightings([f[2] for f in finals.values()]),
                         sum(f[3] for f in finals.values()), sum(f[4] for f in finals.values()))


def _merge_sightings(parts: list[dict[str, dict[str, dict]]]) -> dict[str, dict[str, Sighting]]:
    """Each reason's earliest sighting over the workers (they start at the same instant); counts
    summed. `completed_before` is the earliest worker's own count times the workers (an estimate)."""
    merged: dict[str, dict[str, Sighting]] = {}
    for part in parts:
        for model, reasons in part.items():
            into = merged.setdefault(model, {})
            for reason, data in reasons.items():
                sighting = Sighting(**data)
                sighting.completed_before *= max(1, len(parts))
                old = into.get(reason)
                if old is None:
                    into[reason] = sighting
                else:
                    first = sighting if sighting.t_s < old.t_s else old
                    into[reason] = Sighting(first.t_s, first.wall, first.completed_before, old.count + sighting.count)
    return merged


class StartSignal:
    """The instant every worker starts at, given once all of them are ready (modules imported and
    transport made: a worker spawned on a loaded machine may need seconds for that), so that no
    worker's windows start late against the others' and against the server's edge snapshots."""

    def __init__(self, context: Any) -> None:
        self.at = context.Value("d", 0.0)
        self.go = context.Event()

    def give(self, delay_s: float) -> float:
        self.at.value = time.time() + delay_s
        self.go.set()
        return self.at.value


class EdgeSnapshots(threading.Thread):
    """The server's snapshots at the windows' edges on the workers' shared clock: edge k at
    `first_edge` (wall clock, warm-up end) + k windows, taken by a thread of the parent. A window's
    server delta is then the one between its own two edges, not between the instants its last part
    reached the parent, which trail the edges by the queue and by a busy parent (on a loaded 2-core
    machine by 10% of a short window, counted against the server)."""

    def __init__(self, probe: Any, first_edge: float, window_s: float, stop: Any,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(name="server-edges", daemon=True)
        self.probe = probe
        self.first_edge = first_edge
        self.window_s = window_s
        self.stop = stop
        self.clock = clock
        self.snapshots: dict[int, Any] = {}
        self._taken = threading.Condition()

    def run(self) -> None:
        edge = 0
        while not self.stop.wait(max(0.0, self.first_edge + edge * self.window_s - self.clock())):
            self.take(edge)
            edge += 1
        with self._taken:  # a window waiting for an edge that will not come stops waiting
            self._taken.notify_all()

    def take(self, edge: int) -> None:
        snapshot = self.probe.snapshot()
        with self._taken:
            self.snapshots[edge] = snapshot
            self._taken.notify_all()

    def window(self, index: int, wait_s: float) -> ServerWindow | None:
        """The server's delta over window `index` (edges index and index + 1), waiting up to `wait_s`
        for its closing edge; None where an edge was not taken (the run stopped first)."""
        with self._taken:
            self._taken.wait_for(lambda: index + 1 in self.snapshots or self.stop.is_set(), wait_s)
            before, after = self.snapshots.get(index), self.snapshots.get(index + 1)
            for edge in [e for e in self.snapshots if e < index]:  # windows close in order
                del self.snapshots[edge]
        return window_delta(before, after) if before is not None and after is not None else None


class ArrivalSnapshots:
    """The server's delta since the previous window, read as each window is assembled: for workers
    polled from afar (Ray), whose parts arrive in batches and whose clocks differ by their offsets."""

    def __init__(self, probe: Any) -> None:
        self.probe = probe
        self.last: Any = None

    def mark(self) -> None:
        """The start of the first window (warm-up end)."""
        self.last = self.probe.snapshot()

    def window(self, index: int, wait_s: float) -> ServerWindow | None:
        snapshot = self.probe.snapshot()
        delta = window_delta(self.last, snapshot) if self.last is not None else None
        self.last = snapshot
        return delta


class WindowAssembler:
    """Joins the workers' parts of each measurement window (by window index) into one Window once
    every worker has sent its part: merged tallies, the span from the earliest begin to the latest
    end, and the server's statistics between the window's edges. Keeps the last tallies as well."""

    def __init__(self, workers: int, plan: TrafficPlan, edges: EdgeSnapshots | ArrivalSnapshots | None) -> None:
        self.workers = workers
        self.plan = plan
        self.edges = edges
        self.windows: list[Window] = []
        self.recent: list[dict[str, Tally]] = []
        self._pending: dict[int, dict[int, tuple]] = {}

    def add(self, worker: int, index: int, begin: float, end: float, wire: Any) -> bool:
        """Take one worker's part; True when that closed the window."""
        self._pending.setdefault(index, {})[worker] = (begin, end, wire)
        if len(self._pending[index]) < self.workers:
            return False
        parts = self._pending.pop(index).values()
        tallies = _merge_parts([p[2] for p in parts])
        begin, end = min(p[0] for p in parts), max(p[1] for p in parts)
        stats, by_model = summarize(tallies, end - begin)
        window = Window(index, begin, end, stats, by_model,
                        tallies=tallies if self.plan.keep_window_tallies else None)
        if self.edges is not None:
            window.server = self.edges.window(index, EDGE_WAIT_S + (self.plan.window_s or 0.0))
        self.windows.append(window)
        self.recent = (self.recent + [tallies])[-max(1, self.plan.keep_tallies):]
        return True


def _merge_parts(parts: list[dict[str, dict]]) -> dict[str, Tally]:
    merged: dict[str, Tally] = {}
    for part in parts:
        for model, wire in part.items():
            tally = Tally.from_wire(wire)
            if model in merged:
                merged[model].merge(tally)
            else:
                merged[model] = tally
    return merged
