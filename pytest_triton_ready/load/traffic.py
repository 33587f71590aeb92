"""The asyncio core: closed-loop and open-loop traffic, recorded into overall stats, measurement
windows and a timeline.

Closed loop: N requests in flight per model; each one is sent again as soon as it answers, so the
client slows down with the server (it self-throttles). Latency runs from the actual send.

Open loop: requests are due at a fixed or Poisson rate whatever the response time, so a slow
server cannot slow the sending (no coordinated omission). Latency runs from the send: whatever
waits on the server (a free connection, an HTTP/2 stream) is inside it, while the load
generator's own lateness against the due instant (the event loop's timers count whole
milliseconds; a busy loop starts a send late) is counted apart as late sends (past
LATE_SEND_S), which the client-health guard judges (load/client_health.py), and never read as the
server's latency. A request that cannot be sent on time is dropped and counted: when
`max_in_flight` requests are already waiting, or when it is already `late_drop_s` overdue.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .heap import frozen_heap
from .requests import PreparedRequest, RequestPool, SequencePlan
from .server_side import ServerProbe, ServerSnapshot, ServerWindow, window_delta
from .stats import Stats, Tally
from .timeline import Timeline
from .window_recorder import Recorder, Sighting, summarize

DEFAULT_MAX_IN_FLIGHT = 1024
DEFAULT_LATE_DROP_S = 0.05
# An open-loop request sent this long after it was due counts as a late send (the load generator
# fell behind its schedule); one dropped for lateness counts too. LAG_PERIOD_S: the period of the
# timer whose overshoot is the event loop's lag (load/client_health.py).
LATE_SEND_S = 0.005
LAG_PERIOD_S = 0.01
# Requests in flight when the traffic stops are left to finish (uncounted) for up to this long, or
# the request timeout if shorter, before they are cancelled: cancelling a gRPC call while the server
# answers it crashes tritonserver before 24.12 (SIGSEGV in pthread_mutex_lock; server issues #7368,
# #8034, fixed by #7840 and #8220), and a measurement must not take the server down.
DRAIN_S = 10.0


@dataclass
class Window:
    """One measurement window: client stats (all models and each), server-side deltas."""

    index: int
    start_s: float  # seconds since the measurement started (after warm-up)
    end_s: float
    stats: Stats
    by_model: dict[str, Stats]
    server: ServerWindow | None = None
    # The window's own tallies (histograms) by model, kept when the plan asks (`keep_window_tallies`):
    # a measurement's confidence intervals come from them (load/confidence.py).
    tallies: dict[str, Tally] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "start_s": round(self.start_s, 3), "end_s": round(self.end_s, 3),
                "stats": self.stats.to_dict(), "by_model": {m: s.to_dict() for m, s in self.by_model.items()},
                "server": self.server.to_dict() if self.server else None}


@dataclass
class TrafficPlan:
    """What to send. `concurrency` (closed loop) or `rates` (open loop), per model."""

    pools: dict[str, RequestPool]
    mode: str  # "closed" | "open"
    concurrency: dict[str, int] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)
    poisson: bool = False
    warmup_s: float = 0.0
    window_s: float | None = None
    bin_s: float | None = Timeline.DEFAULT_BIN_S
    max_bins: int = Timeline.DEFAULT_MAX_BINS
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    late_drop_s: float = DEFAULT_LATE_DROP_S
    duration_s: float | None = None  # None: until stopped
    keep_windows: int = 10_000
    keep_tallies: int = 3  # the last windows' tallies kept for merging: at least the windows a measurement reports
    keep_window_tallies: bool = False  # each Window keeps its tallies (for a measurement's intervals; not for soaks)
    seed: int | None = None
    # A request still unanswered this long after it was sent counts as failed ("timeout: ...") at the
    # next window's end or tick, and when the traffic stops; its answer, if one comes, is ignored.
    request_timeout_s: float | None = None


@dataclass
class TrafficResult:
    """What a run of traffic produced: stats after warm-up (all models, and each), the windows,
    the timeline, and the tallies of the last windows (for merging)."""

    stats: Stats
    by_model: dict[str, Stats]
    windows: list[Window]
    timeline: Timeline | None
    recent_tallies: list[dict[str, Tally]]
    mode: str
    started_at: float
    ended_at: float
    in_flight_at_stop: int = 0  # sent but unanswered when the traffic stopped (left to finish, not counted)
    sightings: dict[str, dict[str, Sighting]] = field(default_factory=dict)  # model -> reason -> first seen
    timed_out: int = 0  # requests counted as failed because they were outstanding past the request timeout
    completed: int = 0  # answers and errors, warm-up included

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "stats": self.stats.to_dict(), "in_flight_at_stop": self.in_flight_at_stop,
                "timed_out": self.timed_out,
                "sightings": {m: {r: x.to_dict() for r, x in by.items()} for m, by in self.sightings.items()},
                "by_model": {m: s.to_dict() for m, s in self.by_model.items()},
                "windows": [w.to_dict() for w in self.windows],
                "timeline": self.timeline.to_dict() if self.timeline else None}


class Traffic:
    """Runs one TrafficPlan inside an event loop. `stop()` may be called from any thread."""

    def __init__(self, plan: TrafficPlan, sender: Any, probe: ServerProbe | None = None,
                 on_window: Callable[[Window], Any] | None = None,
                 stop_when: Callable[[list[Window]], bool] | None = None) -> None:
        self.plan = plan
        self.sender = sender
        self.probe = probe
        self.on_window = on_window
        self.on_tallies: Callable[[Window, dict[str, Tally]], Any] | None = None  # worker processes ship these
        self.stop_when = stop_when
        self.windows: deque[Window] = deque(maxlen=plan.keep_windows)
        self.timeline: Timeline | None = None
        self.recorder: Recorder | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._in_flight = 0
        self._tasks: set[asyncio.Task] = set()
        self._last_snapshot: ServerSnapshot | None = None
        self.started = 0.0
        self._stop_requested = False
        self._sent = 0
        self._outstanding: dict[int, tuple[str, float]] = {}  # request number -> (model, sent at), in send order
        self._given_up: set[int] = set()  # counted as timeouts; their late answers are ignored
        self._draining = False  # the traffic stopped: answers still arriving are not counted
        self.timed_out = 0
        self.counter_base = random.randrange(1 << 24)  # unique inputs across runs and worker processes
        self._slot_locks: dict[tuple[str, int], asyncio.Lock] = {}  # sequence slots shared by closed workers
        self._open_sequences: list[tuple[RequestPool, _SequenceCursors]] = []  # the open loop's live sequences

    # -- control -----------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop_requested = True
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # the loop closed meanwhile: the traffic has ended anyway
                pass

    def event(self, name: str) -> None:
        if self.timeline is not None:
            self.timeline.event(name, time.monotonic())

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # -- running -----------------------------------------------------------------------------
    async def run(self) -> TrafficResult:
        """Send the plan's traffic until its duration ends or `stop()`, with the process's objects
        kept out of the collector's scans meanwhile (load/heap.py)."""
        with frozen_heap():
            return await self._run()

    async def _run(self) -> TrafficResult:
        plan = self.plan
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._stop_requested:
            self._stop.set()
        if self.probe is not None:
            self._last_snapshot = await asyncio.to_thread(self.probe.snapshot)
        self.started = time.monotonic()
        models = list(plan.pools)
        self.timeline = Timeline(self.started, plan.bin_s, plan.max_bins) if plan.bin_s else None
        self.recorder = Recorder(models, self.started, plan.warmup_s, plan.window_s, self.timeline,
                                 keep_tallies=plan.keep_tallies)
        if plan.warmup_s and self.probe is not None:
            self._loop.call_later(plan.warmup_s, self._snapshot_at_warmup_end)
        if plan.mode == "closed":
            senders = [self._closed_worker(plan.pools[m], w) for m in models for w in range(plan.concurrency.get(m, 1))]
        elif plan.mode == "open":
            rng = random.Random(plan.seed)
            senders = [self._open_scheduler(plan.pools[m], plan.rates[m], rng) for m in models]
        else:
            raise ValueError(f"mode must be closed or open, got {plan.mode!r}")
        workers = [asyncio.create_task(s) for s in senders]
        ticker = asyncio.create_task(self._ticker())
        lag_probe = asyncio.create_task(self._lag_probe())
        try:
            if plan.duration_s is not None:
                try:
                    await asyncio.wait_for(self._stop.wait(), plan.warmup_s + plan.duration_s)
                except asyncio.TimeoutError:
                    pass
            else:
                await self._stop.wait()
        finally:
            self._stop.set()
            ended = time.monotonic()
            self._expire(ended)
            in_flight_at_stop = self._in_flight - len(self._given_up)
            self._draining = True
            if plan.mode == "open":  # a scheduler only sleeps or spawns: cancelling it cancels no request
                for worker in workers:
                    worker.cancel()
            await self._drain([*workers, *self._tasks])
            await self._end_open_sequences()
            await asyncio.gather(*workers, ticker, lag_probe, return_exceptions=True)  # both end by themselves
            for index, begin, end, tallies in self.recorder.roll(ended):  # windows that ended meanwhile
                await self._close_window(index, begin, end, tallies)
            await self.sender.close()
        self.recorder.finish(ended)
        duration = max(0.0, ended - self.recorder.measure_from)
        stats, by_model = summarize(self.recorder.overall, duration)
        return TrafficResult(stats, by_model, list(self.windows), self.timeline,
                             list(self.recorder.recent_tallies), plan.mode, self.started, ended, in_flight_at_stop,
                             self.recorder.sightings, self.timed_out, self.recorder.completed)

    async def _drain(self, tasks: list[asyncio.Task]) -> None:
        """Wait for the requests in flight to finish (DRAIN_S at most, or the request timeout), then
        cancel what is still open."""
        pending = [t for t in tasks if not t.done()]
        if not pending:
            return
        limit = min(DRAIN_S, self.plan.request_timeout_s) if self.plan.request_timeout_s else DRAIN_S
        _, still_open = await asyncio.wait(pending, timeout=limit)
        for task in still_open:
            task.cancel()
        await asyncio.gather(*still_open, return_exceptions=True)

    async def _end_open_sequences(self) -> None:
        """The END step for every sequence the open loop started and the stop cut (answered, not
        counted): a sequence left open holds its slot in the sequence batcher until
        max_sequence_idle_microseconds, and the next requests to the model wait for one."""
        await self._drain([asyncio.ensure_future(self._one(pool, 0, request))
                           for pool, cursors in self._open_sequences for request in cursors.cut()])

    def _expire(self, now: float) -> None:
        """Count requests outstanding past the request timeout as failed (once each)."""
        limit = self.plan.request_timeout_s
        if not limit or self.recorder is None:
            return
        reason = f"timeout: no answer within {limit:g} s"
        for number, (model, sent_at) in self._outstanding.items():
            if now - sent_at < limit:
                break  # in send order: the rest are younger
            if number in self._given_up:
                continue
            self._given_up.add(number)
            self.timed_out += 1
            self.recorder.error(model, now, reason)

    def _snapshot_at_warmup_end(self) -> None:
        async def take() -> None:
            self._last_snapshot = await asyncio.to_thread(self.probe.snapshot)
        self._spawn(take())

    def _spawn(self, coroutine) -> asyncio.Task:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _ticker(self) -> None:
        """Closes timeline bins and windows even when no response arrives."""
        step = min(x for x in (self.plan.bin_s, self.plan.window_s, 0.1) if x)
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._stop.wait(), step / 2)
                return
            except asyncio.TimeoutError:
                pass
            now = time.monotonic()
            self._expire(now)
            if self.timeline is not None:
                self.timeline.tick(now)
            for index, begin, end, tallies in self.recorder.roll(now):
                await self._close_window(index, begin, end, tallies)

    async def _lag_probe(self) -> None:
        """The event loop's lag: how late a timer of LAG_PERIOD_S fires (a loop busy with sends,
        answers or a blocking call fires it late), recorded into the windows."""
        while not self._stop.is_set():
            asked = time.monotonic()
            await asyncio.sleep(LAG_PERIOD_S)
            now = time.monotonic()
            self.recorder.lag(now, max(0.0, now - asked - LAG_PERIOD_S))

    async def _close_window(self, index: int, begin: float, end: float, tallies: dict[str, Tally]) -> None:
        stats, by_model = summarize(tallies, end - begin)
        window = Window(index, begin, end, stats, by_model,
                        tallies=tallies if self.plan.keep_window_tallies else None)
        if self.on_tallies is not None:
            self.on_tallies(window, tallies)
        if self.probe is not None:
            snapshot = await asyncio.to_thread(self.probe.snapshot)
            if self._last_snapshot is not None:
                window.server = window_delta(self._last_snapshot, snapshot)
            self._last_snapshot = snapshot
        self.windows.append(window)
        if self.on_window is not None:
            try:
                self.on_window(window)
            except Exception as exc:  # the caller's callback must not kill the traffic
                window.stats.errors.setdefault(f"on_window callback raised {type(exc).__name__}", 0)
        if self.stop_when is not None and self.stop_when(list(self.windows)):
            self._stop.set()

    async def _one(self, pool: RequestPool, i: int, request: PreparedRequest | None = None,
                   on_done: Callable[[], Any] | None = None, due: float | None = None) -> str | None:
        """Send one request and record its outcome. Latency counts from the send; an open-loop
        request's lateness against its `due` instant is the load generator's own, counted apart
        (a late send past LATE_SEND_S), never added to the server's latency."""
        sent = time.monotonic()
        if due is not None and sent - due > LATE_SEND_S:
            self.recorder.late(pool.model, sent)
        self._in_flight += 1
        self._sent += 1
        number = self._sent
        self._outstanding[number] = (pool.model, sent)
        error: str | None = None
        try:
            error = await self.sender.send(pool, request or pool.take(i), self.counter_base + number)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a transport bug is an error of this request, not of the run
            error = f"client error: {type(exc).__name__}: {exc}"[:160]
        finally:
            self._in_flight -= 1
            self._outstanding.pop(number, None)
            if on_done is not None:
                on_done()
        if number in self._given_up:  # already counted as a timeout
            self._given_up.discard(number)
            return error
        if self._draining:  # answered after the measurement ended: not part of it
            return error
        now = time.monotonic()
        if error is None:
            self.recorder.ok(pool.model, now, now - sent)
        else:
            self.recorder.error(pool.model, now, error)
        return error

    async def _closed_worker(self, pool: RequestPool, worker: int = 0) -> None:
        sequences = getattr(pool, "sequences", None)
        if sequences is not None:
            await self._sequence_worker(pool, sequences, worker)
            return
        i = random.randrange(len(pool.requests))
        while not self._stop.is_set():
            await self._one(pool, i)
            i += 1

    async def _sequence_worker(self, pool: RequestPool, sequences: SequencePlan, worker: int) -> None:
        """Whole sequences, one request in flight: START, the middle steps, END on one correlation
        id, then the next sequence. Workers beyond the model's live-sequence limit share a slot
        in turn. A sequence cut by the stop still gets its END step (answered, not counted)."""
        slot = worker % sequences.live
        lock = self._slot_locks.setdefault((pool.model, slot), asyncio.Lock())
        n = worker
        while not self._stop.is_set():
            async with lock:
                if self._stop.is_set():  # waited for the slot past the stop: no new sequence
                    return
                cid = sequences.correlation_id(self.counter_base)
                length = len(sequences.steps[n % len(sequences.steps)])
                for k in range(length):
                    if self._stop.is_set() and k:
                        await self._one(pool, 0, sequences.request(n, k, cid, last=True))
                        break
                    error = await self._one(pool, 0, sequences.request(n, k, cid))
                    if error is not None and k < length - 1:  # the sequence is broken: end it, start anew
                        await self._one(pool, 0, sequences.request(n, k, cid, last=True))
                        break
            n += sequences.live

    async def _open_scheduler(self, pool: RequestPool, rate: float, rng: random.Random) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        interval = 1.0 / rate
        due = time.monotonic()
        i = 0
        plan = self.plan
        sequences = getattr(pool, "sequences", None)
        cursors = _SequenceCursors(sequences, self.counter_base) if sequences is not None else None
        if cursors is not None:
            self._open_sequences.append((pool, cursors))
        while not self._stop.is_set():
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
                now = time.monotonic()
            while due <= now:
                if self._in_flight >= plan.max_in_flight or now - due > plan.late_drop_s:
                    if now - due > LATE_SEND_S:
                        self.recorder.late(pool.model, now)
                    self.recorder.drop(pool.model, now)
                elif cursors is not None:  # the arrival is the next step of an idle live sequence
                    taken = cursors.take()
                    if taken is None:
                        self.recorder.drop(pool.model, now)
                    else:
                        cursor, request = taken
                        self._spawn(self._one(pool, i, request, on_done=lambda c=cursor: cursors.release(c), due=due))
                else:
                    self._spawn(self._one(pool, i, due=due))
                    i += 1
                due += rng.expovariate(rate) if plan.poisson else interval


class _SequenceCursors:
    """Open loop on a sequence model: `live` sequences, each advanced one step per arrival while no
    request of it is in flight (an arrival that finds every live sequence busy is dropped)."""

    def __init__(self, sequences: SequencePlan, base: int) -> None:
        self.sequences = sequences
        self.base = base
        self.idle: deque[list] = deque([[n, 0, sequences.correlation_id(base)] for n in range(sequences.live)])

    def take(self) -> tuple[list, PreparedRequest] | None:
        if not self.idle:
            return None
        cursor = self.idle.popleft()
        n, k, cid = cursor
        return cursor, self.sequences.request(n, k, cid)

    def cut(self) -> list[PreparedRequest]:
        """The END request of every idle sequence that has started and not ended; each cursor
        then starts a new sequence."""
        ends = []
        for cursor in self.idle:
            n, k, cid = cursor
            if k > 0:
                ends.append(self.sequences.request(n, k, cid, last=True))
                cursor[:] = [n + self.sequences.live, 0, self.sequences.correlation_id(self.base)]
        return ends

    def release(self, cursor: list) -> None:
        n, k, _ = cursor
        if k + 1 >= len(self.sequences.steps[n % len(self.sequences.steps)]):
            cursor[:] = [n + self.sequences.live, 0, self.sequences.correlation_id(self.base)]
        else:
            cursor[1] = k + 1
        self.idle.append(cursor)
