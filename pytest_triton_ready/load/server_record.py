"""What the server said about a measurement, recorded on a check: its stage times per request,
batch sizes, queue share and pending requests, and for an ensemble or BLS model each composing
model's queue and compute time, the slowest step, and the steps that failed requests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..server.pipelines import bottleneck, step_times

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


def record_server_side(check: CheckRecorder, measurement: Any, model: str, steps: Sequence[str] = ()) -> None:
    """The server's view of `measurement` (stage times, batch sizes, queue share) as measurements;
    a warning where the windows mixed servers; the composing `steps` of a pipeline too."""
    if measurement.server is not None and measurement.server.mixed_servers:
        check.finding(measurement.server.mixed_servers, severity="warning", model=model)
    if steps:
        record_steps(check, measurement, model, list(steps))
    server = measurement.server_model
    if server is None:
        return
    for stage, value in server.stage_us.items():
        if value is not None:
            check.measure(f"server {stage} time per request", round(value, 1), "us", model=model)
    if server.average_batch_size is not None:
        check.measure("average batch size (server)", round(server.average_batch_size, 2), "requests", model=model)
    if server.metrics_average_batch_size is not None:
        check.measure("average batch size (metrics)", round(server.metrics_average_batch_size, 2), "requests",
                      model=model)
    if server.pending_requests is not None:
        check.measure("pending requests (last window)", server.pending_requests, "requests", model=model)
    if server.queue_share is not None:
        check.measure("queue share of server latency", round(server.queue_share, 3), "ratio", model=model)


def record_steps(check: CheckRecorder, measurement: Any, model: str, steps: list[str]) -> None:
    """An ensemble's or BLS model's composing models: queue and compute time per request over the
    same windows (as perf_analyzer reports them), and the slowest step named."""
    times = step_times(measurement.server, steps)
    for step in times:
        if step.queue_us is not None:
            check.measure(f"step {step.model} queue time per request", round(step.queue_us, 1), "us", model=model)
        if step.compute_us is not None:
            check.measure(f"step {step.model} compute time per request", round(step.compute_us, 1), "us", model=model)
    record_step_failures(check, measurement, model, times)
    missing = [s for s in steps if s not in {t.model for t in times}]
    if missing and measurement.server is not None and not measurement.server.mixed_servers:
        check.finding(f"{model}: no statistics for the composing model(s) {', '.join(missing)}: their share of "
                      "the latency is unknown", severity="warning", model=model)
    slowest = bottleneck(times)
    if slowest is not None:
        check.measure("bottleneck step", slowest.model, model=model)
        check.finding(f"{model}: the slowest step is {slowest.describe()}", severity="info", model=model,
                      rule="pipeline-bottleneck")


def record_step_failures(check: CheckRecorder, measurement: Any, model: str, times: Sequence[Any]) -> bool:
    """An error finding for each composing model that failed requests during the measurement
    (said to be swallowed where the pipeline itself answered without errors); True if any did."""
    for step in (t for t in times if t.failed):
        swallowed = not measurement.stats.errors
        check.finding(f"{model}: its composing model {step.model} failed {step.failed} of {step.requests} "
                      "requests during the measurement" + (f", yet {model} answered every request without an "
                                                           "error: the error is swallowed" if swallowed else ""),
                      model=model, rule="pipeline-step-failed")
    return any(t.failed for t in times)
