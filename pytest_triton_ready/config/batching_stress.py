"""CFG-2: each dynamically batched model driven at its saturation concurrency (2 x max_batch_size
x instances, at most curve_max_concurrency) and judged: its average batch is larger than
batching_min_average_batch_size (decided with confidence), near its preferred sizes, and the
parameter to move named when the queue's share of latency is above batching_queue_share_max
(config/batching.py). Which models are in scope: batched, not sequence-batched, not ensembles (an
ensemble has no scheduler: its steps are measured as models of their own); decoupled ones are
named as not verified here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import progress
from ..load.decision import Rule
from ..load.judged import record_judgement, record_reuse
from ..load.profile import ModelProfile
from ..load.server_record import record_server_side
from ..server.models import ready_decoupled_models
from .batching import batching_advice, far_from_preferred

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


def saturation_concurrency(prof: ModelProfile, cap: int) -> int:
    """The model's saturation concurrency, at most `cap` (curve_max_concurrency) when it is set."""
    return min(prof.saturation_concurrency, cap) if cap > 0 else prof.saturation_concurrency


def batched_in_scope(triton: Any, check: CheckRecorder, profiles: Sequence[ModelProfile]) -> list[ModelProfile]:
    """The models CFG-2 drives: batched with dynamic_batching. Ends the check INCOMPLETE or NOT
    APPLICABLE where there is none, and warns about models it cannot verify (decoupled ones) or
    that batch nothing (max_batch_size without dynamic_batching)."""
    batchable = [p for p in profiles if p.max_batch_size > 0 and not p.sequence and p.pipeline != "ensemble"]
    streamed = [m for m in ready_decoupled_models(triton) if "dynamic_batching" in triton.client.model_config(m)]
    if not batchable and streamed:
        check.incomplete(f"{', '.join(streamed)}: decoupled with dynamic batching, and this check drives unary "
                         "models only: batching under streaming load is not verified")
    if not batchable:
        check.not_applicable("no READY model in scope can batch (max_batch_size > 0, no sequence batcher)")
    for model in streamed:
        check.finding(f"{model}: decoupled with dynamic batching: its batching under streaming load is not verified "
                      "by this check", severity="warning", model=model)
    for prof in batchable:
        if prof.dynamic_batching is None:
            check.finding(f"{prof.model}: max_batch_size {prof.max_batch_size} but no dynamic_batching: every "
                          "request runs alone", severity="warning", model=prof.model)
            check.recommend(f"{prof.model}: add `dynamic_batching {{ }}` to config.pbtxt so concurrent requests share executions.")
    batched = [p for p in batchable if p.dynamic_batching is not None]
    if not batched:
        check.not_applicable("no model in scope uses dynamic batching")
    return batched


def stress(load: Any, check: CheckRecorder, health: Any, batched: Sequence[ModelProfile]) -> list[str]:
    """Measure and judge every batched model at saturation; the reasons left undecided."""
    cap = int(check.threshold("curve_max_concurrency").value)
    min_batch = check.threshold("batching_min_average_batch_size")
    undecided: list[str] = []
    for number, prof in enumerate(batched, start=1):
        model = prof.model
        if health.skip(model):
            continue
        concurrency = saturation_concurrency(prof, cap)
        progress.step(f"{model}: batching at saturation, concurrency {concurrency} (model {number} of {len(batched)})")
        rule = Rule("average batch size", "average batch size", ">", float(min_batch.value), "requests")
        measurement = load.measure(model, concurrency=concurrency, judge=[rule], reuse=True)
        record_reuse(check, model, f"concurrency {concurrency}", measurement)
        check.measure("saturation concurrency", concurrency, "requests", model=model)
        if health.observe(measurement, model=model, label=f"concurrency {concurrency}"):
            continue
        undecided += judge_batching(check, prof, measurement, min_batch)
    return undecided


def judge_batching(check: CheckRecorder, prof: ModelProfile, measurement: Any, min_batch: Any) -> list[str]:
    """Record one model's saturation measurement and judge its batches; the reasons left undecided."""
    model = prof.model
    check.measure("throughput", round(measurement.stats.throughput_infer_s, 1), "infer/s", model=model)
    check.measure("p99 latency", measurement.stats.p99_ms, "ms", model=model)
    check.measure("windows measured", len(measurement.windows), "windows", model=model)
    check.evidence(f"{model}: window stability (evidence, not a gate)", measurement.stability_detail)
    server = measurement.server_model
    if not measurement.trustworthy or server is None or server.average_batch_size is None:
        why = (measurement.problem() or (measurement.server and measurement.server.mixed_servers)
               or "the server statistics gave no batch size")
        return [f"{model}: {why}"]
    judged = measurement.judgement("average batch size")
    batch = judged.value if judged.value is not None else server.average_batch_size
    too_close = record_judgement(check, judged, model=model, threshold=min_batch, digits=2,
                                 finding=f"{model}: batches stay at {batch:.2f} requests under saturation")
    check.measure("max_queue_delay_microseconds", prof.max_queue_delay_us, "us", model=model)
    preferred = prof.preferred_batch_sizes
    if far_from_preferred(batch, preferred, check.threshold("batching_preferred_fraction").value):
        check.finding(f"{model}: average batch {batch:.1f} is far from the preferred sizes {preferred}",
                      severity="warning", model=model)
    share = server.queue_share
    if share is not None:
        check.measure("queue share of server latency", round(share, 3), "ratio", model=model)
    advice = batching_advice(prof, batch, share, check.threshold("batching_queue_share_max").value)
    if advice:
        check.finding(f"{model}: {advice[0]}", severity="warning" if batch > min_batch.value else "error", model=model)
        check.recommend(f"{model}: {advice[1]}")
    record_server_side(check, measurement, model, prof.steps)
    return [too_close] if too_close else []
