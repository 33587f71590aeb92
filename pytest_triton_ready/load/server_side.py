"""The server's side of a measurement window: deltas of /v2/models/M/stats and of the Prometheus
metrics between two snapshots, and the GPUs read at the window's end.

Snapshots use plain HTTP (urllib) and the metrics scraper, both safe to call from the load
engine's background thread. A snapshot that cannot be taken is kept as its error text, so a
window without server data says why instead of showing zeros.

Counters only grow on one server. A counter that goes backwards between two snapshots means the
snapshots came from different servers (replicas behind a load balancer, with no `fleet:` section
to reach each one) or the server restarted: then every delta of the measurement may pair two
servers' counters, and its server-side numbers are left out with the reason (`MIXED_SERVERS`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..server.under_test import ServerUnderTest

STAGES = ("queue", "compute_input", "compute_infer", "compute_output")
MIXED_SERVERS = "statistics counters went backwards between two snapshots"
MIXED_SERVERS_ADVICE = ("the snapshots came from more than one server (replicas behind a load balancer: name them "
                        "under fleet.replicas to measure each) or the server restarted; server-side numbers of this "
                        "measurement are left out")


@dataclass
class ServerSnapshot:
    at: float
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)  # model -> one version's statistics
    metrics: Any = None  # MetricsSnapshot
    gpus: list = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class ModelWindow:
    """One model's server-side numbers over one window (times in microseconds per request)."""

    model: str
    success: int
    fail: int
    inference_count: int
    execution_count: int
    stage_us: dict[str, float | None]
    average_batch_size: float | None
    pending_requests: float | None
    metrics_average_batch_size: float | None = None  # the same ratio from nv_inference_count / _exec_count


    @property
    def request_us(self) -> float | None:
        parts = [v for v in self.stage_us.values() if v is not None]
        return sum(parts) if parts else None

    @property
    def queue_share(self) -> float | None:
        total = self.request_us
        queue = self.stage_us.get("queue")
        return queue / total if total and queue is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "success": self.success, "fail": self.fail,
                "inference_count": self.inference_count, "execution_count": self.execution_count,
                "stage_us": self.stage_us, "average_batch_size": self.average_batch_size,
                "pending_requests": self.pending_requests, "queue_share": self.queue_share,
                "metrics_average_batch_size": self.metrics_average_batch_size}


@dataclass
class ServerWindow:
    models: dict[str, ModelWindow] = field(default_factory=dict)
    gpu_utilization: float | None = None  # mean over GPUs, 0..1
    gpu_memory_used_fraction: float | None = None  # highest over GPUs
    errors: list[str] = field(default_factory=list)

    @property
    def mixed_servers(self) -> str | None:
        """The reason the server-side numbers were left out when counters went backwards, else None."""
        return next((e for e in self.errors if MIXED_SERVERS in e), None)

    def to_dict(self) -> dict[str, Any]:
        return {"models": {m: w.to_dict() for m, w in self.models.items()}, "gpu_utilization": self.gpu_utilization,
                "gpu_memory_used_fraction": self.gpu_memory_used_fraction, "errors": self.errors}


class ServerProbe:
    """Takes snapshots of the server for a set of models."""

    def __init__(self, raw_get: Callable[[str], tuple[int, bytes]], models: list[str],
                 scrape: Callable[[], Any] | None = None, gpu_reader: Any = None) -> None:
        self.raw_get = raw_get
        self.models = list(models)
        self.scrape = scrape
        self.gpu_reader = gpu_reader

    @classmethod
    def for_target(cls, target: ServerUnderTest, models: list[str], gpu_reader: Any = None) -> ServerProbe:
        """A probe of `models` and of every model they run through (an ensemble's steps, a BLS
        model's declared callees), so that a pipeline's measurement has each step's times."""
        from ..server.pipelines import composing_of_any

        steps = composing_of_any(models, target.client.model_config, getattr(target.settings, "bls_composing", {}))
        return cls(lambda path: target.client.raw(path), list(models) + sorted(steps - set(models)),
                   target.scrape_metrics, gpu_reader)

    def snapshot(self) -> ServerSnapshot:
        snap = ServerSnapshot(time.monotonic())
        for model in self.models:
            try:
                status, body = self.raw_get(f"/v2/models/{model}/stats")
                if status != 200:
                    snap.errors.append(f"{model}: /v2/models/{model}/stats answered {status}")
                    continue
                versions = json.loads(body).get("model_stats", [])
                snap.stats[model] = _sum_versions(versions)
            except Exception as exc:  # a failed probe must not stop the load
                snap.errors.append(f"{model}: statistics unavailable: {exc}")
        if self.scrape is not None:
            try:
                snap.metrics = self.scrape()
            except Exception as exc:
                snap.errors.append(f"metrics unavailable: {exc}")
        if self.gpu_reader is not None:
            try:
                snap.gpus = self.gpu_reader.read()
            except Exception as exc:
                snap.errors.append(f"GPU readings unavailable: {exc}")
        return snap


def _sum_versions(versions: list[dict[str, Any]]) -> dict[str, Any]:
    """Counters summed over the model's versions (a reload can add a version mid-run)."""
    total = {"inference_count": 0, "execution_count": 0, "inference_stats": {}}
    for version in versions:
        total["inference_count"] += int(version.get("inference_count", 0))
        total["execution_count"] += int(version.get("execution_count", 0))
        for stage, value in version.get("inference_stats", {}).items():
            slot = total["inference_stats"].setdefault(stage, {"count": 0, "ns": 0})
            slot["count"] += int(value.get("count", 0))
            slot["ns"] += int(value.get("ns", 0))
    return total


def _went_backwards(then: dict[str, Any], now: dict[str, Any]) -> str | None:
    """The first counter that is lower in `now` than in `then`, as 'name before -> after'."""
    pairs = [("inference_count", then["inference_count"], now["inference_count"]),
             ("execution_count", then["execution_count"], now["execution_count"])]
    for stage, value in then["inference_stats"].items():
        later = now["inference_stats"].get(stage, {"count": 0, "ns": 0})
        pairs += [(f"{stage} count", value["count"], later["count"]), (f"{stage} ns", value["ns"], later["ns"])]
    return next((f"{name} {a} -> {b}" for name, a, b in pairs if b < a), None)


def several_servers(reads: list[bytes]) -> str | None:
    """From consecutive bodies of GET /v2/models/stats (every model), the proof that more than one
    server answered them: the first counter that went backwards between two reads, else None."""
    previous: dict[str, dict[str, Any]] = {}
    for body in reads:
        current: dict[str, list[dict[str, Any]]] = {}
        for entry in json.loads(body).get("model_stats", []):
            current.setdefault(entry.get("name", ""), []).append(entry)
        totals = {name: _sum_versions(versions) for name, versions in current.items()}
        for name, now in totals.items():
            if name in previous:
                backwards = _went_backwards(previous[name], now)
                if backwards is not None:
                    return f"{name}: {backwards}"
        previous = totals
    return None


def window_delta(before: ServerSnapshot, after: ServerSnapshot) -> ServerWindow:
    window = ServerWindow(errors=list(after.errors))
    for model, now in after.stats.items():
        then = before.stats.get(model)
        if then is None:
            continue
        backwards = _went_backwards(then, now)
        if backwards is not None:
            window.errors.append(f"{model}: {MIXED_SERVERS} ({backwards}): {MIXED_SERVERS_ADVICE}")
            window.models.clear()
            break
        stats_now, stats_then = now["inference_stats"], then["inference_stats"]

        def diff(stage: str, key: str, now: dict = stats_now, then: dict = stats_then) -> int:
            return now.get(stage, {}).get(key, 0) - then.get(stage, {}).get(key, 0)

        success = diff("success", "count")
        stage_us = {}
        for stage in STAGES:
            count = diff(stage, "count")
            stage_us[stage] = diff(stage, "ns") / count / 1000.0 if count > 0 else None
        inferences = now["inference_count"] - then["inference_count"]
        executions = now["execution_count"] - then["execution_count"]
        pending = metrics_batch = None
        if after.metrics is not None:
            samples = after.metrics.select("nv_inference_pending_request_count", model=model)
            pending = sum(s.value for s in samples) if samples else None
            if before.metrics is not None:
                executed = after.metrics.delta(before.metrics, "nv_inference_exec_count", model=model)
                inferred = after.metrics.delta(before.metrics, "nv_inference_count", model=model)
                metrics_batch = inferred / executed if executed > 0 else None
        window.models[model] = ModelWindow(
            model, success, diff("fail", "count"), inferences, executions, stage_us,
            inferences / executions if executions > 0 else None, pending, metrics_batch,
        )
    utilizations = [g.utilization for g in after.gpus if g.utilization is not None]
    memory = [g.memory_used_fraction for g in after.gpus if g.memory_used_fraction is not None]
    window.gpu_utilization = sum(utilizations) / len(utilizations) if utilizations else None
    window.gpu_memory_used_fraction = max(memory) if memory else None
    return window
