"""Streaming load in worker processes, for when one Python process cannot drive the streams: the
users (closed loop) or the rate (open loop) are split across processes, each a StreamingLoad over
its share on its own event loop and channel, and their tallies are merged in the parent
(HdrHistograms travel encoded; the per-request samples share the host's monotonic clock, so the
intervals of load/streaming/confidence.py are made from all of them).

Every worker starts at one instant, given once all are ready (load/workers.StartSignal). At each
look every worker sends its tally so far; the parent merges them and decides, as load/workers.py
does with the unary windows, then stops all workers at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..plan_runners import PlanNotRun
from ..workers import WorkerProcesses, die_with_runner, split
from .requests import StreamingPlan
from .stats import StreamStats, StreamTally, StuckRequest
from .traffic import StreamingLoad, StreamingResult, measured_stats


def _stream_worker(index: int, grpc_url: str, plan: StreamingPlan, share: dict[str, Any], start: Any, out: Any,
                   stop: Any, runner_pid: int | None = None) -> None:
    die_with_runner(runner_pid)
    try:
        load = StreamingLoad(grpc_url, plan, **share,
                             on_look=lambda look, tally: out.put(("look", index, look, tally.to_wire())))
        out.put(("ready", index))
        while not start.go.wait(0.1):
            if stop.is_set():
                return
        time.sleep(max(0.0, start.at.value - time.time()))
        load.start()
        while load.running and not stop.wait(0.05):
            pass
        result = load.stop()
        out.put(("done", index, load.tally.to_wire(), load.warm_tally.to_wire(),
                 [vars(s) for s in result.in_flight_at_stop]))
    except BaseException as exc:  # reported to the parent, which raises it
        out.put(("error", index, f"{type(exc).__name__}: {exc}"))


@dataclass
class LookParts:
    """The workers' tallies at each look, merged once every worker has sent its own."""

    workers: int
    _pending: dict[float, list[StreamTally]] = field(default_factory=dict)

    def add(self, look: float, wire: dict[str, Any]) -> StreamTally | None:
        """Take one worker's tally at `look`; the merged tally when that was the last one."""
        parts = self._pending.setdefault(look, [])
        parts.append(StreamTally.from_wire(wire))
        if len(parts) < self.workers:
            return None
        return merged_tallies(self._pending.pop(look))


def merged_tallies(tallies: Sequence[StreamTally]) -> StreamTally:
    total = StreamTally()
    for tally in tallies:
        total.merge(tally)
    return total


class StreamWorkers:
    """A StreamingLoad's measurement (closed or open loop, `load` as StreamingLoad's keywords, all
    of them plain data) split across `workers` processes; `run()` returns the merged
    StreamingResult, stopped at the first look where `stop_when` says so (decided here, on the
    merged tally). A worker that failed or never reported raises PlanNotRun with its reason."""

    def __init__(self, workers: int, grpc_url: str, plan: StreamingPlan, *, looks_s: Sequence[float] = (),
                 stop_when: Callable[[StreamStats], bool] | None = None, max_wait_s: float = 3600.0,
                 **load: Any) -> None:
        if (load.get("concurrency") is None) == (load.get("rate") is None):
            raise ValueError("give either concurrency (closed loop) or rate (open loop)")
        self.grpc_url = grpc_url
        self.plan = plan
        self.looks_s = sorted(looks_s) if stop_when is not None else []
        self.stop_when = stop_when
        self.max_wait_s = max_wait_s
        self.load = load
        self.workers = max(1, min(workers, int(load["concurrency"]))) if load.get("concurrency") else max(1, workers)

    def shares(self) -> list[dict[str, Any]]:
        """Each worker's keywords: its part of the users (closed loop: one stream per user) or of the
        rate and the streams it spreads over, its own first user number and seed."""
        load, n = self.load, self.workers
        closed = load.get("concurrency") is not None
        users = load.get("users") or load.get("concurrency") or max(1, min(64, int(load["rate"] * 2)))
        user_shares = split(users, n, True)
        rates = split(load["rate"], n, False) if not closed else [None] * n
        seed = load.get("seed")
        shares, first = [], 0
        for i in range(n):
            share = {**load, "users": max(1, int(user_shares[i])), "first_user": first, "looks_s": self.looks_s,
                     "seed": None if seed is None else seed + i}
            if closed:
                share["concurrency"] = share["users"]
            else:
                share["rate"] = rates[i]
            first += share["users"]
            shares.append(share)
        return shares

    def run(self) -> StreamingResult:
        shares = self.shares()
        pool = WorkerProcesses(_stream_worker, [(self.grpc_url, self.plan, share) for share in shares], self.max_wait_s)
        looks = LookParts(len(shares))
        decided_at: float | None = None
        decided: StreamStats | None = None
        with pool:
            for message in pool.messages():
                if message[0] != "look" or decided is not None or self.stop_when is None:
                    continue
                tally = looks.add(message[2], message[3])
                if tally is not None and self.stop_when(snapshot := tally.summary()):
                    decided_at, decided = message[2], snapshot
                    pool.stop.set()
        finals = pool.finals
        if pool.errors:
            raise PlanNotRun(f"a streaming load worker failed: {pool.errors[0]}")
        if len(finals) < len(shares):
            raise PlanNotRun(f"{len(shares) - len(finals)} of {len(shares)} streaming load workers ended without "
                             "their results")
        tally = merged_tallies([StreamTally.from_wire(f[0]) for f in finals.values()])
        warm = merged_tallies([StreamTally.from_wire(f[1]) for f in finals.values()])
        leftover = [StuckRequest(**s) for f in finals.values() for s in f[2]]
        return StreamingResult(measured_stats(tally.summary(), decided), warm.summary() if self.load.get("warmup_s") else None,
                               [], leftover, [], None, decided_at, workers=len(shares))
