"""PERF-2: each model's throughput-latency curve measured point by point as the capacity search
(performance/curve.py) asks, then judged: enough trustworthy points, the shape before the knee, some point
within the budget, and the capacity within SLO published (a `Capacity` fact; a lower bound where
the search's bound stopped it still rising). A model that lost an instance, or whose composing
steps failed, publishes no capacity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .. import progress
from ..facts import Capacity, Facts
from ..load.confidence import finite
from ..load.judged import record_reuse
from ..load.profile import ModelProfile
from ..load.server_record import record_step_failures
from ..server.pipelines import step_times
from .curve import (
    KNEE_AND_CAPACITY,
    CapacitySearch,
    CurvePoint,
    capacity,
    drops_inside_noise,
    enough_trusted,
    knee,
    shape_problems,
    undecided_within,
)
from .measured_models import budget_note
from .server_cpu import ServerCpu

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


@dataclass(frozen=True)
class SweepLimits:
    """The thresholds a sweep runs and judges under."""

    success_min: float
    cap: int  # curve_max_concurrency (0: none)
    search_max_concurrency: int
    min_gain: float
    knee_fraction: float
    drop_tolerance: float

    @classmethod
    def of(cls, check: CheckRecorder) -> SweepLimits:
        def value(name: str) -> float:
            return check.threshold(name).value

        return cls(value("success_rate_min"), int(value("curve_max_concurrency")),
                   int(value("curve_search_max_concurrency")), value("curve_min_gain"),
                   value("curve_knee_fraction"), value("curve_drop_tolerance"))


@dataclass
class Curve:
    """One model's measured curve: its points in concurrency order, the search that chose them,
    and whether an instance died or a composing step failed on the way."""

    search: CapacitySearch
    points: list[CurvePoint] = field(default_factory=list)
    died: bool = False
    step_failed: bool = False


def sweep(load: Any, check: CheckRecorder, health: Any, profiles: Sequence[ModelProfile], facts: Facts,
          limits: SweepLimits) -> list[str]:
    """Measure and judge every profile's curve; the reasons the check cannot decide (empty: none)."""
    incomplete: list[str] = []
    check.evidence("knee and capacity", KNEE_AND_CAPACITY)
    for prof in profiles:
        if health.skip(prof.model):
            facts.withdraw(Capacity, prof.model)
            continue
        budget_note(check, prof)
        curve = measure_curve(load, check, health, prof, limits)
        record_curve(check, prof, curve)
        if curve.died or curve.step_failed:
            facts.withdraw(Capacity, prof.model)  # no capacity for a model that lost an instance or whose steps fail
            continue
        if not enough_trusted(curve.points):
            trusted = sum(1 for p in curve.points if p.trustworthy)
            incomplete.append(f"{prof.model}: only {trusted} of {len(curve.points)} curve points are stable and valid")
            continue
        undecided = judge_curve(check, prof, curve, limits)
        if undecided:
            incomplete.append(undecided)
            facts.withdraw(Capacity, prof.model)  # a capacity nobody could decide is none to plan with
            continue
        publish_capacity(check, prof, curve, limits, facts)
    return incomplete


def measure_curve(load: Any, check: CheckRecorder, health: Any, prof: ModelProfile, limits: SweepLimits) -> Curve:
    """The points the capacity search asks for, each measured until its questions are decided."""
    model = prof.model
    search = CapacitySearch(prof.max_batch_size, prof.instances, prof.budget_p99_ms, limits.success_min,
                            max_concurrency=limits.cap or limits.search_max_concurrency, min_gain=limits.min_gain,
                            target_throughput=prof.min_throughput)
    curve = Curve(search)
    cpu = ServerCpu(getattr(health, "target", None))  # a health watch without a target: no process to read
    while (concurrency := search.next_level(curve.points)) is not None:
        progress.step(f"{model}: concurrency {concurrency} (point {len(curve.points) + 1}, "
                      f"search bound {search.max_concurrency})")
        # Warm-up once per model: later points follow traffic that already warmed the model. Each
        # point at its share of the curve's error budget (CapacitySearch.planned_points).
        rules = load.rules() if not curve.points else load.rules(warmup_s=0.0)
        rules = replace(rules, shares=search.planned_points)
        cpu.start()
        m = load.measure(model, concurrency=concurrency, rules=rules, reuse=True,
                         judge=search.point_rules(curve.points, concurrency, limits.drop_tolerance))
        cores = cpu.cores()
        record_reuse(check, model, f"concurrency {concurrency}", m)
        if health.observe(m, model=model, label=f"concurrency {concurrency}"):
            curve.died = True  # the rest of the curve would measure a broken model
            break
        curve.points.append(replace(CurvePoint.measured(concurrency, m), server_cpu_cores=cores))
        if prof.steps and not curve.step_failed:
            curve.step_failed = record_step_failures(check, m, model, step_times(m.server, list(prof.steps)))
        if m.problem():
            check.finding(f"{model}: concurrency {concurrency}: {m.problem()}", severity="warning", model=model)
        for note in m.too_close():
            check.finding(f"{model}: concurrency {concurrency} ({len(m.windows)} windows): {note}",
                          severity="info", model=model)
        for judgement in (j for j in m.judgements if j.futile):
            check.finding(f"{model}: concurrency {concurrency} ({len(m.windows)} windows): left undecided inside "
                          f"its noise, which the window budget would not resolve: {judgement.describe()}",
                          severity="info", model=model)
    curve.points.sort(key=lambda p: p.concurrency)
    return curve


def record_curve(check: CheckRecorder, prof: ModelProfile, curve: Curve) -> None:
    """Why the search stopped, the charts and every point (throughput, p99, the report's load point)."""
    model, points, search = prof.model, curve.points, curve.search
    if search.reason:
        check.finding(f"{model}: the sweep stopped at concurrency {points[-1].concurrency if points else 0} "
                      f"(rule of thumb {search.rule_of_thumb}): {search.reason}", severity="info",
                      model=model)
    curve_charts(check, model, prof, points)
    for p in points:
        check.measure(f"throughput at concurrency {p.concurrency}", round(p.throughput_infer_s, 1), "infer/s", model=model)
        check.measure(f"p99 at concurrency {p.concurrency}", p.p99_ms, "ms", model=model)
        check.load_point(p.for_report(model))


def judge_curve(check: CheckRecorder, prof: ModelProfile, curve: Curve, limits: SweepLimits) -> str | None:
    """The knee, the shape before it (no decided fall, no latency explosion below the target load)
    and some point within the budget; the sentence that leaves the latter too close to call (no
    point decidedly within the budget, some within it by value), or None."""
    model, points = prof.model, curve.points
    knee_point = knee(points, limits.knee_fraction)
    check.measure("knee concurrency", knee_point.concurrency, "requests", model=model)
    check.measure("knee throughput", round(knee_point.throughput_infer_s, 1), "infer/s", model=model)
    shape = check.mark()
    for problem in shape_problems(points, knee_point, limits.drop_tolerance, prof.budget_p99_ms, prof.min_throughput):
        check.finding(f"{model}: {problem}", model=model, rule="PERF-2")
    check.judged_since(shape, "throughput does not fall before the knee, latency does not explode below the "
                       "target load", measured=f"{len(points)} curve points", model=model)
    for note in drops_inside_noise(points, limits.drop_tolerance):
        check.finding(f"{model}: {note}", severity="info", model=model)
    if prof.min_throughput is None:
        check.finding(f"{model}: no min_throughput SLO, so 'latency explodes below the target load' is not "
                      "checked", severity="info", model=model)
    best = capacity(points, prof.budget_p99_ms, limits.success_min)
    maybe = undecided_within(points, prof.budget_p99_ms, limits.success_min)
    shown = "; ".join(f"concurrency {p.concurrency}: p99 {p.p99_ms:.4g} ms, "
                      + (p.p99_interval.describe('ms', 4) if p.p99_interval else "no interval") for p in maybe)
    if best is None and maybe:
        return (f"{model}: too close to call whether some point keeps p99 within {prof.budget_p99_ms:g} ms: "
                f"none decidedly does ({shown})")
    if maybe:
        check.finding(f"{model}: the capacity is chosen among the points decidedly within {prof.budget_p99_ms:g} ms; "
                      f"undecided, so left out: {shown}", severity="info", model=model)
    if not check.judge("some point keeps p99 within the budget", best is not None,
                       measured=f"p99 of {len(points)} curve points against {prof.budget_p99_ms:g} ms", model=model,
                       finding=f"{model}: no concurrency keeps p99 within {prof.budget_p99_ms:g} ms "
                               f"({prof.budget_source})"):
        check.recommend(f"{model}: the model is slower than its budget even at concurrency 1: speed it up "
                        "(batching, a faster backend, more instances) or revisit the SLO.")
    return None


def publish_capacity(check: CheckRecorder, prof: ModelProfile, curve: Curve, limits: SweepLimits, facts: Facts) -> Capacity:
    """The capacity within SLO (0 where no point is within it), recorded and published."""
    model, points = prof.model, curve.points
    best = capacity(points, prof.budget_p99_ms, limits.success_min)
    trusted = [p for p in points if p.trustworthy]
    client_limited = best.client_limited if best else None  # load/client_health.py
    lower_bound = curve.search.capacity_is_lower_bound(points) or client_limited is not None
    found = Capacity(model, max_throughput_within_slo_infer_s=float(best.throughput_infer_s) if best else 0.0,
                     p99_ms=float(best.p99_ms if best else trusted[0].p99_ms),
                     concurrency=int(best.concurrency if best else trusted[0].concurrency),
                     instances=int(prof.instances), slo_p99_ms=prof.slo_p99_ms, lower_bound=lower_bound,
                     throughput_low_infer_s=best.throughput_interval.low if best and best.throughput_interval else None,
                     level=best.throughput_interval.level if best and best.throughput_interval else None,
                     server_cpu_cores=best.server_cpu_cores if best else None)
    facts.publish(found)
    if found.server_cpu_cores is not None:
        check.measure("server CPU at the capacity point", found.server_cpu_cores, "cores", model=model)
    check.measure("max throughput within SLO", round(found.max_throughput_within_slo_infer_s, 1),
                  "infer/s", model=model)
    check.measure("capacity is a lower bound", "yes" if lower_bound else "no", model=model)
    if client_limited:
        check.finding(f"{model}: capacity >= {found.max_throughput_within_slo_infer_s:.0f} infer/s, {client_limited}",
                      severity="warning", model=model)
    elif lower_bound:
        check.finding(f"{model}: capacity >= {found.max_throughput_within_slo_infer_s:.0f} infer/s: "
                      f"throughput still rose within SLO at the search's bound (concurrency {points[-1].concurrency}, "
                      "curve_search_max_concurrency)", severity="warning", model=model)
    if prof.min_throughput is not None:
        check.measure("max throughput within SLO vs min_throughput",
                      round(found.max_throughput_within_slo_infer_s, 1), "infer/s", model=model,
                      threshold=prof.min_throughput, comparison=">=")
    return found


def curve_charts(check: CheckRecorder, model: str, prof: ModelProfile, points: Sequence[CurvePoint]) -> None:
    """Every point of the curve, each with its p99 interval where measured; untrustworthy points
    are drawn too and marked."""
    def marker(p: CurvePoint) -> str:
        return f"c={p.concurrency}" + ("" if p.trustworthy else " (not valid)")

    interval = [p for p in points if p.p99_interval is not None]
    check.chart(f"{model}: latency vs throughput", "throughput (infer/s)", "latency (ms)",
                {"p50": [(p.throughput_infer_s, p.p50_ms) for p in points],
                 "p99": [(p.throughput_infer_s, p.p99_ms) for p in points]},
                markers=[{"x": p.throughput_infer_s, "label": marker(p)} for p in points])
    series = {"p50": [(p.concurrency, p.p50_ms) for p in points],
              "p99": [(p.concurrency, p.p99_ms) for p in points]}
    if interval:
        level = f"{interval[0].p99_interval.level:.0%}"
        series[f"p99 {level} interval low"] = [(p.concurrency, round(p.p99_interval.low, 4)) for p in interval]
        series[f"p99 {level} interval high"] = [(p.concurrency, round(p.p99_interval.high, 4)) for p in interval
                                                 if finite(p.p99_interval.high) is not None]
    series[f"budget {prof.budget_p99_ms:g} ms"] = [(p.concurrency, prof.budget_p99_ms) for p in points]
    check.chart(f"{model}: latency vs concurrency", "concurrency (requests in flight)", "latency (ms)", series)
