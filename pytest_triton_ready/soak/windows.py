"""One soak window: what the traffic did and what the server (and the runner) looked like.

A window is the unit of everything in a soak: it is journaled as one JSON line, judged by the
per-window rules, and becomes one point of every trend. Memory values are bytes; None means the
value could not be read in that window (it is never replaced by a guess).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

MAX_ERROR_REASONS = 5
MAX_REASON_CHARS = 200


@dataclass
class ModelShare:
    """One model's share of a window."""

    ok: int = 0
    failed: int = 0
    p99_ms: float | None = None


@dataclass
class SoakWindow:
    index: int
    start_s: float  # seconds since the soak started
    end_s: float
    wall_time: float  # unix time at the window's end
    sent: int = 0
    ok: int = 0
    failed: int = 0
    dropped: int = 0  # requests the open loop could not send on time (client-side, not the server's fault)
    errors: dict[str, int] = field(default_factory=dict)  # reason -> count, the most frequent few
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    models: dict[str, ModelShare] = field(default_factory=dict)
    pending_requests: float | None = None  # nv_inference_pending_request_count, summed over models in scope
    host_memory_used_bytes: float | None = None  # nv_cpu_memory_used_bytes: the server host's used RAM
    server_rss_bytes: float | None = None  # RSS of the server's process tree (runner owns the server)
    gpu_memory_used_bytes: float | None = None  # summed over the server's GPUs
    gpu_utilization: float | None = None  # mean over GPUs, 0..1
    runner_rss_bytes: float | None = None
    # The runner's own health (load/client_health.py): sends behind schedule, event-loop lag, CPU.
    late_sends: int = 0
    loop_lag_max_ms: float | None = None
    loop_lag_p99_ms: float | None = None
    runner_cpu_s: float | None = None
    notes: list[str] = field(default_factory=list)  # what could not be read in this window, and why

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def completed(self) -> int:
        return self.ok + self.failed

    @property
    def success_rate(self) -> float | None:
        """Successful share of the requests that completed; None for a window without any."""
        return self.ok / self.completed if self.completed else None

    @property
    def throughput(self) -> float:
        """Successful requests per second."""
        return self.ok / self.duration_s if self.duration_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SoakWindow:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["models"] = {m: ModelShare(**w) for m, w in (data.get("models") or {}).items()}
        return cls(**values)


def top_reasons(errors: dict[str, int], limit: int = MAX_ERROR_REASONS) -> dict[str, int]:
    """The most frequent error reasons, texts shortened, so a window line stays small whatever fails."""
    merged: dict[str, int] = {}
    for reason, count in errors.items():
        short = reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 3] + "..."
        merged[short] = merged.get(short, 0) + count
    ranked = sorted(merged.items(), key=lambda item: -item[1])
    kept = dict(ranked[:limit])
    rest = sum(count for _, count in ranked[limit:])
    if rest:
        kept["(other reasons)"] = rest
    return kept
