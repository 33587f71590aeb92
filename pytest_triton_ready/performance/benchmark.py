"""PERF-1: each model measured at its target load (its min_throughput SLO as Poisson arrivals,
else closed-loop concurrency perf_target_concurrency) and judged: the success rate first (named
whatever the validity), then on a valid measurement the p99 against the budget and, at a
min_throughput target, the achieved rate (performance/target_rules.py). A rule too close to call makes
the check INCOMPLETE, naming it; a dead instance is the finding and its numbers are not judged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import progress
from ..facts import Facts, TargetLoad
from ..load.client_health import record_client_health
from ..load.decision import slo_rules
from ..load.judged import record_judgement
from ..load.profile import ModelProfile
from ..load.server_record import record_server_side
from .measured_models import budget_note
from .target_rules import POISSON_SIGMAS, achieved_ratio, backlog, min_throughput_floor

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


def benchmark(load: Any, check: CheckRecorder, health: Any, profiles: Sequence[ModelProfile], facts: Facts) -> str | None:
    """Measure and judge every profile at its target load; the sentence that makes the check
    INCOMPLETE (rules too close to call, invalid measurements), or None."""
    success_min = check.threshold("success_rate_min")
    undecided: list[str] = []
    for prof in profiles:
        if health.skip(prof.model):
            continue
        budget_note(check, prof)
        measurement, label = measure_at_target(load, check, prof, success_min.value, facts)
        check.evidence(f"{prof.model} measurement", str(measurement.to_dict()["stats"]))
        if health.observe(measurement, model=prof.model, label=label):
            continue  # its numbers describe a broken model: the dead instance is the finding
        undecided += judge_at_target(load, check, prof, measurement, success_min)
    if check.errors and not health.deaths:
        check.recommend("Find the slowest stage in the server times above: queue time means too few instances "
                        "or too long max_queue_delay_microseconds; compute time means a slower model than the SLO allows.")
    return "not decided: " + "; ".join(undecided) if undecided else None


def measure_at_target(load: Any, check: CheckRecorder, prof: ModelProfile, success_min: float, facts: Facts) -> tuple[Any, str]:
    """(measurement, label) at the model's target load, its SLO rules judged; the target load is
    published (a `TargetLoad` fact)."""
    model = prof.model
    rules = slo_rules(prof.budget_p99_ms, success_min)
    if prof.min_throughput:
        progress.step(f"{model}: {prof.min_throughput:g} infer/s offered (Poisson)")
        measurement = load.measure(model, rate=prof.min_throughput, poisson=True, judge=rules)
        check.setting("offered load (Poisson)", prof.min_throughput, "infer/s", model=model, source="slo.min_throughput")
        facts.publish(TargetLoad(model, rate=prof.min_throughput))
        return measurement, f"{prof.min_throughput:g} infer/s offered"
    concurrency = int(check.threshold("perf_target_concurrency").value)
    progress.step(f"{model}: concurrency {concurrency} (closed loop)")
    measurement = load.measure(model, concurrency=concurrency, judge=rules)
    check.measure("concurrency (closed loop)", concurrency, "requests", model=model)
    facts.publish(TargetLoad(model, concurrency=concurrency))
    return measurement, f"concurrency {concurrency}"


def judge_at_target(load: Any, check: CheckRecorder, prof: ModelProfile, measurement: Any, success_min: Any) -> list[str]:
    """Record and judge one model's target-load measurement; the sentences of what it left
    undecided."""
    model, stats = prof.model, measurement.stats
    undecided: list[str] = []
    if stats.errors and hasattr(load.client, "refusal_hint"):  # the requests may be the tool's: say which inputs were made up
        check.evidence(f"{model} requests refused", load.client.refusal_hint(model))
    check.measure("measurement stable", str(measurement.stable), model=model)  # evidence, not a gate
    check.evidence(f"{model}: window stability", measurement.stability_detail)
    check.measure("measurement valid", str(measurement.valid), model=model)
    check.measure("windows measured", len(measurement.windows), "windows", model=model)
    # Success before validity: errors are judged on their rate and named whatever the validity.
    for reason, count in stats.errors.items():
        check.evidence(f"{model} error ({count}x)", reason)
    too_close = record_judgement(check, measurement.judgement("success rate"), model=model,
                                 threshold=success_min, digits=5,
                                 finding=success_finding(model, stats, success_min.value))
    if not measurement.valid:
        return [f"{model}: {measurement.problem()}"]
    if too_close:
        undecided.append(too_close)
    check.measure("throughput", round(stats.throughput_infer_s, 1), "infer/s", model=model)
    for name in ("p50", "p90", "p95", "p99.9"):
        check.measure(f"{name} latency", stats.p(name), "ms", model=model)
    p99 = measurement.judgement("p99 latency")
    interval = p99.estimate.interval.describe("ms", 4) if p99.estimate.interval else "no interval"
    too_close = record_judgement(
        check, p99, model=model,
        finding=f"{model}: p99 {p99.value or 0:.1f} ms exceeds the {prof.budget_p99_ms:g} ms budget "
                f"({prof.budget_source}; {interval})")
    if too_close:
        undecided.append(too_close)
    if prof.min_throughput:
        judge_target_rate(check, model, prof.min_throughput, measurement)
    if stats.client_cpu_us_per_request is not None:
        check.measure("client CPU per request", round(stats.client_cpu_us_per_request, 1), "us", model=model)
    record_client_health(check, measurement, model)
    record_server_side(check, measurement, model, prof.steps)
    return undecided


def success_finding(model: str, stats: Any, success_min: float) -> str:
    """The failure sentence of the success-rate rule, naming the three commonest errors."""
    errors = ", ".join(f"{reason} ({count}x)" for reason, count in sorted(stats.errors.items(), key=lambda e: -e[1])[:3])
    return (f"{model}: success rate {stats.success_rate or 0.0:.2%} is below {success_min:g}"
            + (f"; errors: {errors}" if errors else ""))


def judge_target_rate(check: CheckRecorder, model: str, rate: float, measurement: Any) -> None:
    """At a min_throughput target: achieved / offered in the same windows, the backlog left in flight
    counted as offered and not achieved (performance/target_rules.py), and the measured throughput against
    the SLO's rate less the Poisson arrivals' sampling noise."""
    stats = measurement.stats
    in_flight = measurement.traffic.in_flight_at_stop if measurement.traffic is not None else None
    queued = backlog(in_flight, rate, stats.mean_ms)
    check.measure("requests in flight at the end", in_flight, "requests", model=model)
    check.measure("backlog (in flight beyond rate x mean latency)", queued, "requests", model=model)
    ratio = achieved_ratio(stats, queued)
    check.measure("achieved / offered throughput", round(ratio, 3), "ratio", model=model,
                  threshold=check.threshold("perf_throughput_ratio_min"), comparison=">=",
                  finding=f"{model}: the server completes {stats.throughput_infer_s:.0f} of the {rate:g} infer/s "
                          f"target ({stats.count_ok} of {stats.attempted + queued} offered requests succeeded; "
                          f"{stats.dropped} dropped, {queued} still queued at the end)")
    floor = min_throughput_floor(rate, stats.duration_s)
    check.measure("throughput vs min_throughput", round(stats.throughput_infer_s, 1), "infer/s", model=model,
                  threshold=round(floor, 1), comparison=">=",
                  finding=f"{model}: {stats.throughput_infer_s:.1f} infer/s measured over {stats.duration_s:.1f} s, "
                          f"below the min_throughput SLO of {rate:g} infer/s (floor {floor:.1f}: the SLO less "
                          f"{POISSON_SIGMAS:g} standard deviations of Poisson arrivals)")
