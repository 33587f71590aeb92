"""Traffic from synchronous code: the asyncio loop runs in a background thread while the caller
does other things (reload a model, kill an instance, send SIGTERM), then stops it and reads the
result.

    with load.open_loop("scale", rate=200) as traffic:
        time.sleep(2)
        traffic.event("reload")
        client.load("scale", config=...)
        time.sleep(3)
    result = traffic.result          # stats, timeline (with the "reload" event), windows
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .traffic import Traffic, TrafficResult, Window

_END = object()
_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's where it is installed (the optional extra `fast`) and not turned
    off with TRITON_READY_UVLOOP=0, else the standard one. `loop_kind()` says which."""
    if os.environ.get("TRITON_READY_UVLOOP", "1") != "0":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def loop_kind(loop: asyncio.AbstractEventLoop) -> str:
    """'uvloop' or 'asyncio': the kind of event loop the traffic runs on (for reports and benchmarks)."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def shared_loop() -> asyncio.AbstractEventLoop:
    """The process's one traffic event loop, running in a daemon thread.

    gRPC's asyncio support binds its completion queue to the first loop that uses it; a fresh loop
    per run leaves callbacks aimed at closed loops. One long-lived loop serves every run."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed():
            _LOOP = new_loop()
            threading.Thread(target=_LOOP.run_forever, name="triton-ready-traffic-loop", daemon=True).start()
        return _LOOP


class BackgroundTraffic:
    """Traffic running on the shared event loop, watched by a daemon thread. Use as a context manager, or
    call `start()` and `stop()`. `windows()` yields each closed window as it closes (for long
    runs); `result` is set once stopped."""

    def __init__(self, make_traffic: Callable[[Callable[[Window], Any]], Traffic],
                 on_window: Callable[[Window], Any] | None = None) -> None:
        self._make = make_traffic
        self._user_on_window = on_window
        self._queue: queue.Queue = queue.Queue(maxsize=10_000)
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._traffic: Traffic | None = None
        self._error: BaseException | None = None
        self.result: TrafficResult | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> BackgroundTraffic:
        if self._thread is not None:
            raise RuntimeError("this traffic was already started")
        self._thread = threading.Thread(target=self._main, name="triton-ready-load", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self, timeout_s: float = 60.0) -> TrafficResult:
        """Stop sending, wait for requests in flight to be cancelled, and return the result."""
        if self._thread is None:
            raise RuntimeError("this traffic was never started")
        if self._traffic is not None:
            self._traffic.stop()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"the load thread did not stop within {timeout_s} s")
        if self._error is not None:
            raise self._error
        return self.result

    def wait(self, timeout_s: float | None = None) -> TrafficResult | None:
        """Wait for traffic with a duration to end by itself; the result, or None on timeout."""
        self._thread.join(timeout_s)
        if self._error is not None:
            raise self._error
        return self.result

    def __enter__(self) -> BackgroundTraffic:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- while running -----------------------------------------------------------------------
    def event(self, name: str) -> None:
        """Mark a named moment (now) on the timeline: 'reload started', 'SIGTERM'."""
        if self._traffic is not None:
            self._traffic.event(name)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def in_flight(self) -> int:
        return self._traffic.in_flight if self._traffic else 0

    def elapsed_s(self) -> float:
        return time.monotonic() - self._traffic.started if self._traffic and self._traffic.started else 0.0

    def windows(self, timeout_s: float | None = None) -> Iterator[Window]:
        """Each measurement window as it closes, until the traffic ends. Windows not taken are
        kept up to 10,000 (then the oldest untaken are discarded)."""
        while True:
            try:
                item = self._queue.get(timeout=timeout_s)
            except queue.Empty:
                return
            if item is _END:
                self._queue.put(_END)
                return
            yield item

    def timeline_so_far(self):
        """(bins, events) closed so far, while running."""
        if self._traffic is None or self._traffic.timeline is None:
            return [], []
        return self._traffic.timeline.snapshot()

    # -- the thread --------------------------------------------------------------------------
    def _on_window(self, window: Window) -> None:
        try:
            self._queue.put_nowait(window)
        except queue.Full:
            self._queue.get_nowait()
            self._queue.put_nowait(window)
        if self._user_on_window is not None:
            self._user_on_window(window)

    def _main(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self._run(), shared_loop()).result()
        except BaseException as exc:  # surfaced to the caller by stop()/wait()
            self._error = exc
        finally:
            self._ready.set()
            self._queue.put(_END)

    async def _run(self) -> None:
        try:
            self._traffic = self._make(self._on_window)
        finally:
            self._ready.set()
        self.result = await self._traffic.run()
