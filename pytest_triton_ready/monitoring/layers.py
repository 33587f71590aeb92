"""The four metric layers' live values, read from two scrapes of Triton's endpoint taken `window_s`
apart (counters become rates and ratios over the window; gauges and summaries are read from the
later scrape). GPU values come from nv_gpu_* on the endpoint, else from NVML readings."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ..server.gpu import GpuReading, readings_from_metrics
from ..server.metrics import MetricsSnapshot
from .catalogue import BUSINESS, COST, INFRASTRUCTURE, SERVICE_HEALTH
from .llm import llm_layer_values
from .values import LayerValue

JOULES_PER_KWH = 3.6e6
LATENCY_QUANTILES = ("0.5", "0.9", "0.99", "0.999")


def read_layers(before: MetricsSnapshot, after: MetricsSnapshot, window_s: float,
                gpu_readings: Iterable[GpuReading] = ()) -> list[LayerValue]:
    """Every layer's values over the window between the two scrapes."""
    gpus = readings_from_metrics(after) or list(gpu_readings)
    window = _Window(before, after, window_s)
    return [*_infrastructure(after, gpus), *_service_health(window, after, gpus), *_business(window, after),
            *_cost(window, gpus, before), *llm_layer_values(before, after, window_s)]


class _Window:
    def __init__(self, before: MetricsSnapshot, after: MetricsSnapshot, window_s: float) -> None:
        self.before, self.after, self.seconds = before, after, window_s

    def by_model(self, name: str) -> dict[str, float]:
        """Counter growth per 'model:version' over the window."""
        grown: dict[str, float] = defaultdict(float)
        for sample in self.after.select(name):
            key = _model_key(sample.labels)
            earlier = self.before.select(name, **sample.labels)
            grown[key] += sample.value - (earlier[0].value if earlier else 0.0)
        return dict(grown)

    def total(self, name: str, **labels: str) -> float:
        return self.after.delta(self.before, name, **labels)


def _model_key(labels) -> str:
    return f"{labels.get('model', '?')}:{labels.get('version', '?')}" if "model" in labels else "server"


def _ratio(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return part / whole


def _infrastructure(after: MetricsSnapshot, gpus: list[GpuReading]) -> list[LayerValue]:
    layer = INFRASTRUCTURE
    values = []
    for g in gpus:
        label = f"GPU {g.index} ({g.uuid[:12]})"
        values += [
            LayerValue(layer, f"{label} utilization", g.utilization, "ratio", note=g.source),
            LayerValue(layer, f"{label} memory used", g.memory_used_fraction, "ratio", note=g.source),
            LayerValue(layer, f"{label} power", g.power_w, "W", note=g.source),
            LayerValue(layer, f"{label} power limit", g.power_limit_w, "W", note=g.source),
        ]
    cpu_used = after.total("nv_cpu_memory_used_bytes") if after.select("nv_cpu_memory_used_bytes") else None
    values += [
        LayerValue(layer, "CPU utilization", _gauge(after, "nv_cpu_utilization"), "ratio"),
        LayerValue(layer, "CPU memory used", _ratio(cpu_used, _gauge(after, "nv_cpu_memory_total_bytes")), "ratio"),
        LayerValue(layer, "pinned memory pool used", _ratio(_gauge(after, "nv_pinned_memory_pool_used_bytes"),
                                                            _gauge(after, "nv_pinned_memory_pool_total_bytes")),
                   "ratio"),
    ]
    if not gpus:
        values.append(LayerValue(layer, "GPU", None, "", note="no GPU readings: the endpoint exports no nv_gpu_* "
                                 "metrics and NVML sees no GPU; the CPU values stand for the infrastructure layer"))
    return values


def _service_health(window: _Window, after: MetricsSnapshot, gpus: list[GpuReading]) -> list[LayerValue]:
    layer = SERVICE_HEALTH
    # A cancelled request (reason CANCELED: the client went away, or, on Triton 2.51, the end of an
    # iterative sequence, whose slot the sequence batcher releases by cancelling a null request) is not
    # the server failing: it is listed by reason below and left out of the success rates.
    success = window.total("nv_inference_request_success")
    cancelled = window.total("nv_inference_request_failure", reason="CANCELED")
    failure = window.total("nv_inference_request_failure") - cancelled
    values = [
        LayerValue(layer, "success rate over the window", _ratio(success, success + failure), "ratio",
                   note=f"{success:.0f} succeeded, {failure:.0f} failed"
                        + (f" ({cancelled:.0f} cancelled, not counted)" if cancelled else "")),
    ]
    by_reason: dict[str, float] = defaultdict(float)
    for sample in after.select("nv_inference_request_failure"):
        by_reason[sample.labels.get("reason", "unlabelled")] += window.total("nv_inference_request_failure",
                                                                            **sample.labels)
    values += [LayerValue(layer, f"failures ({reason})", count, "requests") for reason, count in sorted(by_reason.items())]
    all_success = after.total("nv_inference_request_success")
    all_failure = after.total("nv_inference_request_failure") - after.total("nv_inference_request_failure",
                                                                            reason="CANCELED")
    values.append(LayerValue(layer, "success rate since the server started",
                             _ratio(all_success, all_success + all_failure), "ratio"))
    queue = _quantile_by_model(after, "nv_inference_queue_summary_us", "0.95")
    if queue:
        values += [LayerValue(layer, "queue time P95", us / 1000, "ms", model=m) for m, us in queue.items()]
    else:
        queued, served = window.by_model("nv_inference_queue_duration_us"), window.by_model("nv_inference_request_success")
        values += [LayerValue(layer, "queue time mean", _ratio(queued[m] / 1000, served.get(m)), "ms", model=m,
                              note="summaries are off (--metrics-config summary_latencies=true gives P95)")
                   for m in queued]
    values += [LayerValue(layer, "pending requests", s.value, "requests", model=_model_key(s.labels))
               for s in after.select("nv_inference_pending_request_count")]
    utilizations = [g.utilization for g in gpus if g.utilization is not None]
    if len(utilizations) >= 2:
        values.append(LayerValue(layer, "GPU utilization spread across GPUs", max(utilizations) - min(utilizations),
                                 "ratio"))
    else:
        values.append(LayerValue(layer, "balance across instances", None, "",
                                 note="Triton exports no per-instance series; balance is readable across GPUs only, "
                                      f"and this server reports {len(utilizations)}"))
    return values


def _business(window: _Window, after: MetricsSnapshot) -> list[LayerValue]:
    layer = BUSINESS
    inferences = window.by_model("nv_inference_count")
    executions = window.by_model("nv_inference_exec_count")
    values = [LayerValue(layer, "throughput", count / window.seconds, "infer/s", model=m)
              for m, count in inferences.items()]
    values += [LayerValue(layer, "average batch size", _ratio(count, executions.get(m)), "inferences/execution",
                          model=m, note="" if executions.get(m) else "no executions in the window")
               for m, count in inferences.items()]
    for quantile in LATENCY_QUANTILES:
        for m, us in _quantile_by_model(after, "nv_inference_request_summary_us", quantile).items():
            values.append(LayerValue(layer, f"request latency P{float(quantile) * 100:g}", us / 1000, "ms", model=m))
    if not after.select("nv_inference_request_summary_us"):
        durations, served = window.by_model("nv_inference_request_duration_us"), window.by_model("nv_inference_request_success")
        values += [LayerValue(layer, "request latency mean", _ratio(durations[m] / 1000, served.get(m)), "ms",
                              model=m, note="summaries are off: percentiles need summary_latencies=true")
                   for m in durations]
    return values


def _cost(window: _Window, gpus: list[GpuReading], before: MetricsSnapshot) -> list[LayerValue]:
    layer = COST
    inferences = window.by_model("nv_inference_count")
    executions = window.by_model("nv_inference_exec_count")
    requests = window.by_model("nv_inference_request_success")
    compute = window.by_model("nv_inference_compute_infer_duration_us")
    device = "GPU" if gpus else "CPU"
    values = []
    for m, count in inferences.items():
        # Every request of a batch is charged the batch's compute time: the mean per request is the
        # time of one execution, and one execution serves (inferences / executions) inferences.
        per_execution_ms = _ratio(compute.get(m, 0.0) / 1000, requests.get(m))
        values.append(LayerValue(
            layer, f"{device} time per inference",
            None if per_execution_ms is None else per_execution_ms * _ratio(executions.get(m, 0.0), count),
            "ms", model=m, note="compute time of one execution / average batch size" if count else
            "no inferences in the window"))
    total_inferences = sum(inferences.values())
    energy = window.total("nv_energy_consumption") if before.select("nv_energy_consumption") else None
    if energy is None:
        reason = "nv_energy_consumption is not exported (no GPU, or DCGM unavailable)"
        values += [LayerValue(layer, "energy per inference", None, "J", note=reason),
                   LayerValue(layer, "inferences per kWh", None, "infer/kWh", note=reason)]
    else:
        per_inference = _ratio(energy, total_inferences)
        values += [LayerValue(layer, "energy per inference", per_inference, "J"),
                   LayerValue(layer, "inferences per kWh",
                              JOULES_PER_KWH / per_inference if per_inference else None, "infer/kWh")]
    for g in gpus:
        if g.memory_used_bytes is not None:
            values.append(LayerValue(layer, f"GPU {g.index} memory held", g.memory_used_bytes / 2**30, "GiB"))
    return values


def _gauge(snapshot: MetricsSnapshot, name: str) -> float | None:
    samples = snapshot.select(name)
    return samples[0].value if samples else None


def _quantile_by_model(snapshot: MetricsSnapshot, name: str, quantile: str) -> dict[str, float]:
    return {_model_key(s.labels): s.value for s in snapshot.select(name, quantile=quantile)
            if not math.isnan(s.value)}


QUEUE_P95_SOURCE = "nv_inference_queue_summary_us (quantile 0.95)"


@dataclass(frozen=True)
class RuleInput:
    """The value one of MON-1's judged rules reads, or None with the data source that was missing."""

    model: str | None
    value: float | None
    missing: str = ""
    note: str = ""


def success_rate_input(values: list[LayerValue]) -> RuleInput:
    """The success rate over the probe, from nv_inference_request_success / _failure."""
    success = next((v for v in values if v.name == "success rate over the window"), None)
    if success is None or success.value is None:
        note = f" ({success.note})" if success is not None and success.note else ""
        return RuleInput(None, None, "nv_inference_request_success and nv_inference_request_failure did not count the "
                                     f"probe's requests{note}")
    return RuleInput(None, success.value, note=success.note)


def queue_p95_inputs(values: list[LayerValue]) -> list[RuleInput]:
    """Each model's queue time P95 (ms) from Triton's summaries; without summaries no source gives
    a P95 (the counters give a mean only, and a mean says nothing of a P95), so each model that
    queued is returned without a value, naming the missing source."""
    p95 = [RuleInput(v.model, v.value) for v in values if v.layer == SERVICE_HEALTH and v.name == "queue time P95"]
    if p95:
        return p95
    means = [v for v in values if v.layer == SERVICE_HEALTH and v.name == "queue time mean"]
    missing = f"{QUEUE_P95_SOURCE}: summaries are off (start tritonserver with --metrics-config summary_latencies=true)"
    return [RuleInput(v.model, None, missing) for v in means] or [RuleInput(None, None, missing)]

