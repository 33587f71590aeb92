"""The shape the two traffic runners share: `BackgroundTraffic` (unary, load/background.py) and
`StreamingLoad` (decoupled models over gRPC streams, load/streaming/traffic.py). Both run their traffic on
the process's one shared event loop (`background.shared_loop`), watched by a thread.

`TrafficView` is what code that runs alongside traffic needs (a fault experiment marking the
timeline, a sampler counting what is in flight); `TrafficRunner` adds the lifecycle."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class TrafficView(Protocol):
    """Traffic that is running: mark a moment, count what is in flight, read the clock and the
    timeline so far (bins, events)."""

    def event(self, name: str) -> None: ...

    @property
    def in_flight(self) -> int: ...

    def elapsed_s(self) -> float: ...

    def timeline_so_far(self) -> Any: ...


@runtime_checkable
class TrafficRunner(TrafficView, Protocol):
    """Traffic in a background thread: `start()`, then `stop()` (or `wait()` for traffic with a
    duration); `running` from the start until the traffic has ended."""

    def start(self) -> Any: ...

    def stop(self) -> Any: ...

    def wait(self, timeout: float | None = None, /) -> Any: ...

    @property
    def running(self) -> bool: ...


__all__ = ["TrafficRunner", "TrafficView"]
