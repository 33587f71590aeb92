"""Streaming (decoupled) mode of the load engine: gRPC ModelStreamInfer, one bidirectional stream per
virtual user, responses matched to requests by id (what it counts: load/streaming/stats.py).

A request without its final response `deadline_s` after it was sent is **stuck**: it is reported
with its id, the tokens it got and how long it waited, and the user goes on with its next request
(responses are matched by id, so one stuck request does not block its stream). Errors arrive inside
the stream (`error_message`), which stays open; they are counted by reason like the unary engine's.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..heap import frozen_heap
from ..timeline import Timeline
from .requests import StreamingPlan, build_request, decode_outputs, is_final, output_problems, response_tokens, text_of
from .stats import RequestRecord, StreamStats, StreamTally, StuckRequest

STREAMING_DEMO_REPOSITORY = Path(__file__).resolve().parents[2] / "demo" / "streaming"
ERROR_PAUSE_S = 0.01  # closed loop: a user whose request failed waits this long before the next one

PromptSource = Callable[[int], tuple[str, int]]


def default_prompts(max_tokens: int, seed: int | None = None) -> PromptSource:
    """Different prompts on every request (so no cache can answer), from the shipped set
    (prompts.py), each asking for `max_tokens`."""
    from ...prompts import shipped_prompts

    return shipped_prompts(max_tokens, seed)


def measured_stats(final: StreamStats, decided: StreamStats | None) -> StreamStats:
    """What a measurement reports: the stats its rules were decided on at a look (the requests
    that ended by then; those still in flight end afterwards and would only add a sparse tail),
    unless a request stuck or failed after that look (then everything: a failure is never left
    out); all of it when it ran its length."""
    if decided is None or len(final.stuck) > len(decided.stuck) or final.count_errors > decided.count_errors:
        return final
    return decided


class UserStream:
    """One virtual user's bidirectional stream: writes serialized, responses dispatched by id."""

    def __init__(self, stub: Any, user: int, metadata: tuple, token_output: str, keep_text: bool,
                 declared_outputs: list[Mapping[str, Any]] | None = None, batched: bool = False) -> None:
        self.call = stub.ModelStreamInfer(metadata=metadata or None)
        self.declared_outputs = declared_outputs
        self.batched = batched
        self.user = user
        self.pending: dict[str, tuple[RequestRecord, asyncio.Future]] = {}
        self.write_lock = asyncio.Lock()
        self.token_output = token_output
        self.keep_text = keep_text
        self.closed: str | None = None
        self.reader = asyncio.ensure_future(self._read())

    async def send(self, request: Any, rec: RequestRecord) -> asyncio.Future:
        """Write the request; its future resolves with the record at its final response or error.
        A write on a stream the server already ended (or never opened) ends the request at once
        with that error."""
        future = asyncio.get_running_loop().create_future()
        self.pending[rec.id] = (rec, future)
        async with self.write_lock:
            rec.sent = time.monotonic()
            if self.closed is not None:  # the reader saw the stream end: nothing written here is answered
                rec.error = f"stream closed before the final response: {self.closed}"
                rec.end = rec.sent
                self._done(rec, future)
                return future
            try:
                await self.call.write(request)
            except Exception as exc:  # noqa: BLE001 - said on the request
                reason = self.closed or (getattr(exc, "details", lambda: None)() or f"{type(exc).__name__}: {exc}")
                rec.error = rec.error or f"stream closed before the final response: {reason}"
                rec.end = rec.end or time.monotonic()
                self._done(rec, future)
        return future

    async def _read(self) -> None:
        import grpc

        try:
            async for message in self.call:
                now = time.monotonic()
                response = message.infer_response
                entry = self.pending.get(response.id)
                if entry is None:
                    continue  # a stuck request's late answer, or an id the server lost
                rec, future = entry
                rec.responses += 1
                if message.error_message:
                    rec.error = message.error_message
                    rec.end = now
                    self._done(rec, future)
                    continue
                tokens = response_tokens(response, self.token_output)
                if tokens:
                    rec.tokens += tokens
                    rec.first = rec.first if rec.first is not None else now
                    rec.last_data = now
                if self.keep_text and response.outputs:
                    decoded = decode_outputs(response)
                    for name, values in decoded.items():
                        rec.values.setdefault(name, []).append(values)
                    if self.token_output in decoded:
                        rec.text.extend(text_of(decoded[self.token_output]))
                    if self.declared_outputs is not None:
                        rec.problems.extend(p for p in output_problems(response, self.declared_outputs, self.batched)
                                            if p not in rec.problems)
                if is_final(response):
                    rec.final = True
                    rec.end = now
                    self._done(rec, future)
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as exc:
            self.closed = getattr(exc, "details", lambda: "cancelled")() or "stream closed"
        except Exception as exc:  # noqa: BLE001 - the stream is gone; say why on every waiting request
            self.closed = f"{type(exc).__name__}: {exc}"
        else:
            self.closed = "the server ended the stream"
        now = time.monotonic()
        for rec, future in list(self.pending.values()):
            rec.error = rec.error or f"stream closed before the final response: {self.closed}"
            rec.end = rec.end or now
            if not future.done():
                future.set_result(rec)
        self.pending.clear()

    def _done(self, rec: RequestRecord, future: asyncio.Future) -> None:
        self.pending.pop(rec.id, None)
        if not future.done():
            future.set_result(rec)

    def forget(self, rec: RequestRecord) -> None:
        self.pending.pop(rec.id, None)

    async def close(self, cancel: bool = False) -> None:
        if cancel:
            self.call.cancel()
        else:
            try:
                await self.call.done_writing()
            except Exception:  # noqa: BLE001
                pass
        self.reader.cancel()
        try:
            await self.reader
        except (asyncio.CancelledError, Exception):  # noqa: BLE001
            pass


@dataclass
class StreamingResult:
    stats: StreamStats
    warmup: StreamStats | None
    records: list[RequestRecord]
    in_flight_at_stop: list[StuckRequest]
    events: list[tuple[float, str]]
    timeline: Timeline | None = None
    decided_at_s: float | None = None  # the look at which its rules were decided (None: ran its length)
    workers: int = 1  # the processes that drove it (load/streaming/workers.py)

    def to_dict(self) -> dict[str, Any]:
        return {"stats": self.stats.to_dict(), "in_flight_at_stop": [vars(s) for s in self.in_flight_at_stop],
                "events": self.events, "workers": self.workers}


class StreamingLoad:
    """Drives one decoupled model over gRPC ModelStreamInfer.

    `concurrency=N`: closed loop, N users each with its own stream and one request in flight.
    `rate=R`: open loop, requests due at R/s (Poisson with `poisson=True`) spread over `users`
    streams; latency counts from the due time; a request overdue by `late_drop_s` is dropped.
    Runs in a background thread on the shared event loop: `start()`, `stop()`, or `run()` (a
    load/runner.TrafficRunner, as BackgroundTraffic is).
    `looks_s` and `stop_when`: at each of these seconds after the warm-up, `stop_when` is given
    the stats measured so far, and the measurement ends (as at `duration_s`) when it answers
    True (load/streaming/looks.py); `result.decided_at_s` says at which look, and `result.stats`
    are those it was decided on (`measured_stats`). With `on_look` instead, each look hands the
    tally so far to whoever decides (a worker process's parent: load/streaming/workers.py), and
    the traffic ends when it is stopped. `first_user`: the number of its first user (a worker's
    users do not share numbers with the other workers').
    """

    def __init__(self, grpc_url: str, plan: StreamingPlan, *, concurrency: int | None = None,
                 rate: float | None = None, users: int | None = None, poisson: bool = False,
                 duration_s: float | None = None, warmup_s: float = 0.0, deadline_s: float = 30.0,
                 prompts: PromptSource | None = None, max_tokens: int = 32, headers: Mapping[str, str] | None = None,
                 keep_records: int = 0, keep_text: bool = False, late_drop_s: float = 0.5, seed: int | None = None,
                 timeline_bin_s: float | None = None, reconnect: bool = False, version: str | None = None,
                 looks_s: Sequence[float] = (), stop_when: Callable[[StreamStats], bool] | None = None,
                 on_look: Callable[[float, StreamTally], None] | None = None, first_user: int = 0) -> None:
        if (concurrency is None) == (rate is None):
            raise ValueError("give either concurrency (closed loop) or rate (open loop)")
        self.grpc_url = grpc_url
        self.plan = plan
        self.concurrency = concurrency
        self.rate = rate
        self.users = users or concurrency or max(1, min(64, int((rate or 1) * 2)))
        self.poisson = poisson
        self.duration_s = duration_s
        self.warmup_s = warmup_s
        self.deadline_s = deadline_s
        self.prompts = prompts or default_prompts(max_tokens, seed)
        self.metadata = tuple((k.lower(), v) for k, v in (headers or {}).items())
        self.keep_records = keep_records
        self.keep_text = keep_text
        self.late_drop_s = late_drop_s
        self.rng = np.random.default_rng(seed)
        self.tally = StreamTally()
        self.warm_tally = StreamTally()
        self.records: list[RequestRecord] = []
        self.events: list[tuple[float, str]] = []
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._result: StreamingResult | None = None
        self._error: BaseException | None = None
        self._t0 = 0.0
        self._cancel_streams = False
        self._streams: list[UserStream] = []
        self.timeline_bin_s = timeline_bin_s
        self.timeline: Timeline | None = None  # with timeline_bin_s: per-bin successes, errors, drops, p99
        self.reconnect = reconnect
        self.version = version
        self._started = threading.Event()
        self._stub: Any = None
        self.looks_s = sorted(looks_s) if stop_when is not None or on_look is not None else []
        self.stop_when = stop_when
        self.on_look = on_look
        self.first_user = first_user
        self.decided_at_s: float | None = None
        self._decided_stats: StreamStats | None = None

    # -- control from any thread ----------------------------------------------------------------
    def start(self) -> StreamingLoad:
        self._thread = threading.Thread(target=self._main, name=f"streaming-load-{self.plan.model}", daemon=True)
        self._thread.start()
        return self

    def stop(self, cancel: bool = False) -> StreamingResult:
        """End the traffic; with `cancel=True` the streams are cancelled (the server sees the
        client go away mid-stream) instead of being waited for."""
        self._cancel_streams = cancel
        self._stop.set()
        return self.wait()

    def wait(self, timeout: float | None = None) -> StreamingResult:
        assert self._thread is not None, "start() first"
        self._thread.join(timeout)
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def run(self) -> StreamingResult:
        return self.start().wait()

    @property
    def running(self) -> bool:
        """True from `start()` until the traffic has ended."""
        return self._thread is not None and self._thread.is_alive()

    def event(self, name: str) -> None:
        now = time.monotonic()
        self.events.append((round(now - self._t0, 3), name))
        if self.timeline is not None:
            self.timeline.event(name, now)

    def wait_started(self, timeout_s: float = 10.0) -> bool:
        """True once the streams are open and the clock runs (`start()` returns before that)."""
        return self._started.wait(timeout_s)

    def elapsed_s(self) -> float:
        return time.monotonic() - self._t0 if self._started.is_set() else 0.0

    @property
    def in_flight(self) -> int:
        """Requests sent and still waiting for their final response."""
        return sum(len(s.pending) for s in self._streams)

    def timeline_so_far(self) -> Any:
        """(bins, events) closed so far, while running (none without `timeline_bin_s`)."""
        return self.timeline.snapshot() if self.timeline is not None else ([], [])

    def in_flight_sent_before(self, t: float) -> int:
        """Requests still waiting for their final response that were sent before monotonic `t`."""
        return sum(1 for s in self._streams for rec, _ in list(s.pending.values()) if rec.sent and rec.sent < t)

    def tokens_so_far(self) -> int:
        return self.tally.tokens + self.warm_tally.tokens

    def __enter__(self) -> StreamingLoad:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self._result = self.stop()

    @property
    def result(self) -> StreamingResult:
        assert self._result is not None, "the traffic has not ended"
        return self._result

    # -- the event loop ------------------------------------------------------------------------
    def _main(self) -> None:
        from ..background import shared_loop

        try:  # gRPC's asyncio binds to the first loop it meets: every run uses the engine's one loop
            asyncio.run_coroutine_threadsafe(self._run_frozen(), shared_loop()).result()
        except BaseException as exc:  # noqa: BLE001 - re-raised in wait()
            self._error = exc
        finally:
            self._started.set()  # nobody waits for a start that failed

    async def _run_frozen(self) -> None:
        with frozen_heap():  # the process's objects out of the collector's scans meanwhile (load/heap.py)
            await self._run()

    async def _run(self) -> None:
        import grpc
        from tritonclient.grpc import service_pb2_grpc

        options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        async with grpc.aio.insecure_channel(self.grpc_url, options=options) as channel:
            self._stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            self._streams = [self._open(u) for u in range(self.first_user, self.first_user + self.users)]
            self._t0 = time.monotonic()
            if self.timeline_bin_s:
                self.timeline = Timeline(self._t0, self.timeline_bin_s)
            self._started.set()
            end = self._t0 + self.warmup_s + self.duration_s if self.duration_s is not None else None
            watcher = asyncio.ensure_future(self._watch_stop(end))
            if self.concurrency is not None:
                tasks = [asyncio.ensure_future(self._user(s)) for s in self._streams]
            else:
                tasks = [asyncio.ensure_future(self._scheduler())]
            await watcher
            in_flight = [] if self._cancel_streams else await self._drain(tasks)
            now = time.monotonic()
            leftover = [StuckRequest(rec.id, rec.user, rec.tokens, rec.responses, now - (rec.sent or rec.start))
                        for s in self._streams for rec, _ in s.pending.values()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.gather(*(s.close(cancel=True) for s in self._streams), return_exceptions=True)
            del in_flight
        if self.timeline is not None:
            self.timeline.finish(time.monotonic())
        self._result = StreamingResult(measured_stats(self.tally.summary(), self._decided_stats),
                                       self.warm_tally.summary() if self.warmup_s else None,
                                       self.records, leftover, self.events, self.timeline, self.decided_at_s)

    def _open(self, user: int) -> UserStream:
        return UserStream(self._stub, user, self.metadata, self.plan.token_output, self.keep_text)

    async def _watch_stop(self, end: float | None) -> None:
        looks = list(self.looks_s)
        while not self._stop.is_set():
            if end is not None and time.monotonic() >= end:
                return
            if looks and time.monotonic() >= self._t0 + self.warmup_s + looks[0]:
                look = looks.pop(0)
                if looks and self._decided(look):  # the last look is the end: nothing left to decide
                    return
            if self.timeline is not None:
                self.timeline.tick(time.monotonic())
            await asyncio.sleep(0.02)

    def _decided(self, look: float) -> bool:
        if self.on_look is not None:
            self.on_look(look, self.tally)
            return False
        snapshot = self.tally.summary()
        if self.stop_when is not None and self.stop_when(snapshot):
            self.decided_at_s, self._decided_stats = look, snapshot
            return True
        return False

    async def _drain(self, tasks: list[asyncio.Future]) -> list:
        """After the stop: the requests in flight finish or reach their deadline."""
        self._stop.set()
        limit = time.monotonic() + self.deadline_s + 1.0
        while any(s.pending for s in self._streams) and time.monotonic() < limit:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0)
        return []

    def _new_request(self, user: int, start: float) -> tuple[Any, RequestRecord]:
        n = next(self._ids)
        prompt, max_tokens = self.prompts(n)
        rid = f"u{user}-r{n}"
        arrays = self.plan.arrays(prompt, max_tokens, self.rng)
        return build_request(self.plan.model, arrays, rid, version=self.version), RequestRecord(rid, user, start)

    def _tally_for(self, rec: RequestRecord) -> StreamTally:
        return self.warm_tally if rec.start - self._t0 < self.warmup_s else self.tally

    def _finish(self, rec: RequestRecord) -> None:
        self._tally_for(rec).record(rec)
        if self.timeline is not None:
            if rec.error is None and rec.latency_s is not None:
                self.timeline.ok(time.monotonic(), rec.latency_s)
            else:
                self.timeline.error(time.monotonic())
        if self.keep_records and len(self.records) < self.keep_records:
            self.records.append(rec)

    async def _user(self, stream: UserStream) -> None:
        while not self._stop.is_set():
            request, rec = self._new_request(stream.user, time.monotonic())
            rec.start = time.monotonic()
            future = await stream.send(request, rec)
            await self._await(stream, rec, future)
            if stream.closed:
                return
            if rec.error is not None:
                await asyncio.sleep(ERROR_PAUSE_S)  # a refused request is not resent in a busy loop

    async def _await(self, stream: UserStream, rec: RequestRecord, future: asyncio.Future) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout=max(0.0, rec.sent + self.deadline_s - time.monotonic()))
        except asyncio.TimeoutError:
            stream.forget(rec)
            self.tally.record_stuck(rec, time.monotonic())  # stuck in the warm-up is still stuck
            if self.timeline is not None:
                self.timeline.error(time.monotonic())
            if self.keep_records and len(self.records) < self.keep_records:
                self.records.append(rec)
            return
        self._finish(rec)

    async def _scheduler(self) -> None:
        assert self.rate
        interval = 1.0 / self.rate
        due = time.monotonic()
        waiting: set[asyncio.Future] = set()
        users = itertools.cycle(range(len(self._streams)))
        rnd = random.Random(int(self.rng.integers(1 << 30)))
        while not self._stop.is_set():
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
                continue
            index = next(users)
            if self.reconnect and self._streams[index].closed:
                # a client that lost its stream (the server went away) opens a new one for its next request
                self._streams[index] = self._open(self._streams[index].user)
            stream = self._streams[index]
            if now - due > self.late_drop_s:
                self._tally_for(RequestRecord("", 0, due)).dropped += 1
                if self.timeline is not None:
                    self.timeline.drop(now)
            else:
                request, rec = self._new_request(stream.user, due)
                future = await stream.send(request, rec)
                task = asyncio.ensure_future(self._await(stream, rec, future))
                waiting.add(task)
                task.add_done_callback(waiting.discard)
            due += rnd.expovariate(self.rate) if self.poisson else interval
        if waiting:
            await asyncio.gather(*waiting, return_exceptions=True)


if __name__ == "__main__":  # python -m pytest_triton_ready.load.streaming.traffic: where the streaming demo lies
    print(STREAMING_DEMO_REPOSITORY)
