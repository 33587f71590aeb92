"""MON-1 "four metric layers readable": a short probe of every READY model, the four layers read
from the endpoint before and after it, and the rules on what they show (checks/test_monitoring.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..facts import MetricLayers
from ..server.metrics import MetricsSnapshot
from ..server.models import ready_decoupled_models, ready_models
from .catalogue import INFRASTRUCTURE, LAYERS
from .layers import queue_p95_inputs, read_layers, success_rate_input
from .traffic import probe
from .values import LayerValue

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder
    from ..server.under_test import ServerUnderTest

REFRESH_S = 1.0  # gauges and summaries refresh on Triton's metrics interval


def iterative_sequence_note(model: str, server_version: str) -> str:
    """Why a decoupled model with iterative sequence batching counts differently."""
    return (f"{model}: iterative sequence batching: Triton {server_version} counts every decode step as an "
            "inference (nv_inference_count, nv_inference_request_success) and the end of every request "
            "as a CANCELED failure (the sequence batcher frees the slot by cancelling a null request): "
            "its throughput here is steps/s, and alert rules on nv_inference_request_failure must leave "
            "reason=\"CANCELED\" out")


def layer_table(values: list[LayerValue]) -> str:
    """The values as 'layer | name [model] | value unit | note' lines."""
    return "\n".join(
        f"{v.layer} | {v.name}{' [' + v.model + ']' if v.model else ''} | "
        f"{'n/a' if v.value is None else f'{v.value:.4g}'} {v.unit} | {v.note}" for v in values)


def _gpu_values(values: list[LayerValue], suffix: str) -> list[LayerValue]:
    return [v for v in values if v.name.startswith("GPU") and v.name.endswith(suffix) and v.value is not None]


def gpu_memory_warnings(values: list[LayerValue], limit: float) -> list[str]:
    """A warning for each GPU whose memory use is at or above `limit` (a fraction)."""
    return [f"{m.name} is {m.value:.1%}, at or above the {limit:.0%} warning level"
            for m in _gpu_values(values, "memory used") if m.layer == INFRASTRUCTURE and m.value >= limit]


def utilization_notes(values: list[LayerValue], low: float, high: float) -> list[str]:
    """A note for each GPU whose utilization during the probe is outside [low, high]."""
    return [f"{u.name} is {u.value:.0%} during the probe; the target under production load is {low:.0%}-{high:.0%} "
            "(PERF-2 measures it under load)" for u in _gpu_values(values, " utilization") if not low <= u.value <= high]


def probed_layers(check: CheckRecorder, target: ServerUnderTest, read_metrics: Callable[[], MetricsSnapshot], gpu: Any) -> list[LayerValue]:
    """Probe every READY model, then read the four layers over the probe's window; INCOMPLETE
    where no model is READY."""
    models, streaming = ready_models(target), ready_decoupled_models(target)
    if not models and not streaming:
        check.incomplete("no READY model to read the layers under traffic")
    before = read_metrics()
    started = time.monotonic()
    probe(check, target, models, streaming)
    time.sleep(REFRESH_S)
    after = read_metrics()
    version = target.client.server_metadata().get("version", "?")
    for model in streaming:
        if (target.client.model_config(model).get("sequence_batching") or {}).get("iterative_sequence"):
            check.finding(iterative_sequence_note(model, version), severity="info", model=model)
    return read_layers(before, after, time.monotonic() - started, gpu.read())


def judge_layers(check: CheckRecorder, values: list[LayerValue]) -> None:
    """Each layer has a readable value; success rate >= success_rate_min and queue P95 <=
    queue_p95_max_ms (unjudged, with the missing source as evidence, where the endpoint lacks it);
    GPU memory near its limit is a warning, GPU utilization outside its band a note."""
    for value in values:
        check.measure(f"{value.layer}: {value.name}", None if value.value is None else round(value.value, 4),
                      value.unit, model=value.model)
    check.evidence("four metric layers", layer_table(values))
    for layer in LAYERS:
        readable = [v for v in values if v.layer == layer and v.value is not None]
        check.measure(f"{layer}: readable values", len(readable), "values", threshold=1, comparison=">=",
                      finding=f"no {layer} value can be read from the metrics endpoint")
    success = success_rate_input(values)
    if success.value is None:
        check.evidence("success rate not judged", success.missing)
    check.measure("service health: success rate over the probe", None if success.value is None else
                  round(success.value, 5), "ratio", threshold=check.threshold("success_rate_min"), comparison=">=",
                  finding=f"success rate {success.value or 0:.4%} over the probe ({success.note})")
    for queue in queue_p95_inputs(values):
        if queue.value is None:
            check.evidence(f"queue time P95 not judged{' for ' + queue.model if queue.model else ''}", queue.missing)
        check.measure("service health: queue time P95 within budget", None if queue.value is None else
                      round(queue.value, 3), "ms", model=queue.model, threshold=check.threshold("queue_p95_max_ms"))
    for warning in gpu_memory_warnings(values, check.threshold("gpu_memory_used_max_fraction").value):
        check.finding(warning, severity="warning")
    low, high = check.threshold("gpu_utilization_min").value, check.threshold("gpu_utilization_max").value
    for note in utilization_notes(values, low, high):
        check.finding(note, severity="info")


def published(values: list[LayerValue]) -> MetricLayers:
    """The layers as the fact later checks read."""
    return MetricLayers(tuple(dict(vars(v)) for v in values))
