"""Phase "performance" (and CFG-2, which verifies the batching config under stress).

Every number comes from the load engine's windowed measurements (docs/load-engine.md): warm-up
excluded, stable over the last 3 windows, valid by minimum duration and request count. A point
that is not stable and valid is never the reason a check passes.
"""

import pytest

from pytest_triton_ready import progress
from pytest_triton_ready.facts import Capacity, TargetLoad
from pytest_triton_ready.health import LoadHealth
from pytest_triton_ready.load.batching import batching_advice, far_from_preferred
from pytest_triton_ready.load.curve import (
    KNEE_AND_CAPACITY,
    CapacitySearch,
    CurvePoint,
    capacity,
    drops_inside_noise,
    enough_trusted,
    knee,
    shape_problems,
)
from pytest_triton_ready.load.judged import record_judgement
from pytest_triton_ready.load.profile import profile
from pytest_triton_ready.load.rules import Rule, slo_rules
from pytest_triton_ready.load.target_rules import POISSON_SIGMAS, achieved_ratio, backlog, min_throughput_floor
from pytest_triton_ready.models import defer_to_streaming, note_left_out, ready_decoupled_models, ready_models, served_as
from pytest_triton_ready.pipelines import step_times
from pytest_triton_ready.policy import require_allowed

pytestmark = pytest.mark.usefixtures("triton")


def _profiles(triton, check=None):
    models = ready_models(triton)
    if check is not None:
        note_left_out(check, triton)
        if models:
            check.evidence("models and versions measured", "; ".join(served_as(triton, models).values()))
    return [profile(triton.settings, m, triton.client.model_config(m), triton.client.model_config) for m in models]


def _record_server_side(check, measurement, model, steps=()):
    if measurement.server is not None and measurement.server.mixed_servers:
        check.finding(measurement.server.mixed_servers, severity="warning", model=model)
    if steps:
        _record_steps(check, measurement, model, list(steps))
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


def _record_steps(check, measurement, model, steps):
    """An ensemble's or BLS model's composing models: queue and compute time per request over the
    same windows (as perf_analyzer reports them), and the slowest step named."""
    from pytest_triton_ready.pipelines import bottleneck

    times = step_times(measurement.server, steps)
    for step in times:
        if step.queue_us is not None:
            check.measure(f"step {step.model} queue time per request", round(step.queue_us, 1), "us", model=model)
        if step.compute_us is not None:
            check.measure(f"step {step.model} compute time per request", round(step.compute_us, 1), "us", model=model)
    _step_failures(check, measurement, model, times)
    missing = [s for s in steps if s not in {t.model for t in times}]
    if missing and measurement.server is not None and not measurement.server.mixed_servers:
        check.finding(f"{model}: no statistics for the composing model(s) {', '.join(missing)}: their share of "
                      "the latency is unknown", severity="warning", model=model)
    slowest = bottleneck(times)
    if slowest is not None:
        check.measure("bottleneck step", slowest.model, model=model)
        check.finding(f"{model}: the slowest step is {slowest.describe()}", severity="info", model=model,
                      rule="pipeline-bottleneck")


def _step_failures(check, measurement, model, times) -> bool:
    """An error finding for each composing model that failed requests during the measurement
    (said to be swallowed where the pipeline itself answered without errors); True if any did."""
    for step in (t for t in times if t.failed):
        swallowed = not measurement.stats.errors
        check.finding(f"{model}: its composing model {step.model} failed {step.failed} of {step.requests} "
                      "requests during the measurement" + (f", yet {model} answered every request without an "
                                                           "error: the error is swallowed" if swallowed else ""),
                      model=model, rule="pipeline-step-failed")
    return any(t.failed for t in times)


def _untrusted(check, reason):
    """Measurements that are not stable and valid: INCOMPLETE, unless the check already failed."""
    if reason is None:
        return
    if check.errors:
        check.finding(reason, severity="warning")
    else:
        check.incomplete(reason)


def _budget_note(check, prof):
    if prof.slo_p99_ms is None:
        check.finding(f"{prof.model}: no p99 SLO configured; 'within SLO' uses the {prof.budget_source} "
                      f"of {prof.budget_p99_ms:g} ms", severity="info", model=prof.model)


@pytest.mark.triton_check("PERF-1")
def test_benchmark_meets_slo_at_target_load(triton, load, check, triton_facts):
    """At each model's target load the p99 latency is within budget, the throughput reaches the
    target (with a min_throughput SLO: achieved / offered >= perf_throughput_ratio_min, the backlog
    still in flight at the end counted as offered, and the measured throughput at least the SLO's
    rate less the Poisson arrivals' noise), and at least success_rate_min of the requests succeed; no model instance dies under
    the load (a dead instance fails the check whatever the success rate) and no window stalls.
    Publishes each model's target load (a `TargetLoad` fact; PERF-5 measures there again).
    Where every READY model in scope is decoupled, NOT APPLICABLE: test_streaming_slo_at_target_load
    measures TTFT, ITL and tokens/s at the target load."""
    profiles = _profiles(triton, check)
    defer_to_streaming(check, triton, [p.model for p in profiles])
    if not profiles:
        check.incomplete("no READY model in scope to benchmark")
    health = LoadHealth(triton, check, triton_facts, [p.model for p in profiles])
    untrusted = None
    try:
        untrusted = _benchmark(load, check, health, profiles, triton_facts)
    finally:
        health.finish()
    _untrusted(check, untrusted)


def _benchmark(load, check, health, profiles, facts):
    success_min = check.threshold("success_rate_min")
    untrusted = []
    for prof in profiles:
        model = prof.model
        if health.skip(model):
            continue
        _budget_note(check, prof)
        rules = slo_rules(prof.budget_p99_ms, success_min.value)
        if prof.min_throughput:
            progress.step(f"{model}: {prof.min_throughput:g} infer/s offered (Poisson)")
            measurement = load.measure(model, rate=prof.min_throughput, poisson=True, judge=rules)
            check.setting("offered load (Poisson)", prof.min_throughput, "infer/s", model=model, source="slo.min_throughput")
            label = f"{prof.min_throughput:g} infer/s offered"
            facts.publish(TargetLoad(model, rate=prof.min_throughput))
        else:
            concurrency = int(check.threshold("perf_target_concurrency").value)
            progress.step(f"{model}: concurrency {concurrency} (closed loop)")
            measurement = load.measure(model, concurrency=concurrency, judge=rules)
            check.measure("concurrency (closed loop)", concurrency, "requests", model=model)
            label = f"concurrency {concurrency}"
            facts.publish(TargetLoad(model, concurrency=concurrency))
        if health.observe(measurement, model=model, label=label):
            check.evidence(f"{model} measurement", str(measurement.to_dict()["stats"]))
            continue  # its numbers describe a broken model: the dead instance is the finding
        stats = measurement.stats
        check.evidence(f"{model} measurement", str(measurement.to_dict()["stats"]))
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
                                     finding=_success_finding(model, stats, success_min.value))
        if not measurement.valid:
            untrusted.append(f"{model}: {measurement.problem()}")
            continue
        if too_close:
            untrusted.append(too_close)
        check.measure("throughput", round(stats.throughput_infer_s, 1), "infer/s", model=model)
        for name in ("p50", "p90", "p95", "p99.9"):
            check.measure(f"{name} latency", stats.p(name), "ms", model=model)
        p99 = measurement.judgement("p99 latency")
        too_close = record_judgement(
            check, p99, model=model,
            finding=f"{model}: p99 {p99.value or 0:.1f} ms exceeds the {prof.budget_p99_ms:g} ms budget "
                    f"({prof.budget_source}; {p99.estimate.interval.describe('ms', 4) if p99.estimate.interval else 'no interval'})")
        if too_close:
            untrusted.append(too_close)
        if prof.min_throughput:
            _judge_target_rate(check, model, prof.min_throughput, measurement)
        if stats.client_cpu_us_per_request is not None:
            check.measure("client CPU per request", round(stats.client_cpu_us_per_request, 1), "us", model=model)
        _record_server_side(check, measurement, model, prof.steps)
    if check.errors and not health.deaths:
        check.recommend("Find the slowest stage in the server times above: queue time means too few instances "
                        "or too long max_queue_delay_microseconds; compute time means a slower model than the SLO allows.")
    return "not decided: " + "; ".join(untrusted) if untrusted else None


def _success_finding(model, stats, success_min):
    errors = ", ".join(f"{reason} ({count}x)" for reason, count in sorted(stats.errors.items(), key=lambda e: -e[1])[:3])
    return (f"{model}: success rate {stats.success_rate or 0.0:.2%} is below {success_min:g}"
            + (f"; errors: {errors}" if errors else ""))


def _judge_target_rate(check, model, rate, measurement):
    """At a min_throughput target: achieved / offered in the same windows, the backlog left in flight
    counted as offered and not achieved (load/target_rules.py), and the measured throughput against
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


@pytest.mark.triton_check("PERF-2")
def test_throughput_latency_curve(triton, load, check, triton_facts):
    """Sweeping concurrency until the capacity is found, throughput never falls as concurrency rises
    before the knee, latency does not explode below the target load, and some point is within the
    latency budget; the curve, its knee and the capacity within SLO are reported.

    The sweep doubles concurrency up to 2 x max_batch_size x instances and on past it while
    throughput still rises (curve_min_gain per doubling) within SLO and without errors, up to
    curve_search_max_concurrency, bisecting where p99 left the budget; stopped by that bound while
    still rising, the capacity is reported as a lower bound (">= N"). A model with fewer than half
    of its points (or two) stable and valid makes the check INCOMPLETE and publishes no capacity.
    Where every READY model in scope is decoupled, NOT APPLICABLE: test_streaming_tokens_and_ttft_curve
    sweeps streams and publishes their capacity."""
    profiles = _profiles(triton, check)
    defer_to_streaming(check, triton, [p.model for p in profiles])
    require_allowed(check, triton.settings, "saturate", "the throughput-latency sweep drives every model to saturation")
    if not profiles:
        check.incomplete("no READY model in scope to sweep")
    success_min = check.threshold("success_rate_min").value
    cap = int(check.threshold("curve_max_concurrency").value)
    knee_fraction = check.threshold("curve_knee_fraction").value
    drop_tolerance = check.threshold("curve_drop_tolerance").value
    health = LoadHealth(triton, check, triton_facts, [p.model for p in profiles])
    incomplete = None
    try:
        incomplete = _sweep(load, check, health, profiles, triton_facts, success_min, cap, knee_fraction,
                            drop_tolerance)
    finally:
        health.finish()
    _untrusted(check, "; ".join(incomplete) if incomplete else None)


def _sweep(load, check, health, profiles, facts, success_min, cap, knee_fraction, drop_tolerance):
    incomplete = []
    check.evidence("knee and capacity", KNEE_AND_CAPACITY)
    for prof in profiles:
        model = prof.model
        if health.skip(model):
            facts.withdraw(Capacity, model)
            continue
        _budget_note(check, prof)
        search = CapacitySearch(prof.max_batch_size, prof.instances, prof.budget_p99_ms, success_min,
                                max_concurrency=cap or int(check.threshold("curve_search_max_concurrency").value),
                                min_gain=check.threshold("curve_min_gain").value)
        points = []
        died = step_failed = False
        while (concurrency := search.next_level(points)) is not None:
            progress.step(f"{model}: concurrency {concurrency} (point {len(points) + 1}, "
                          f"search bound {search.max_concurrency})")
            # Warm-up once per model: later points follow traffic that already warmed the model.
            rules = load.rules() if not points else load.rules(warmup_s=0.0)
            m = load.measure(model, concurrency=concurrency, rules=rules,
                             judge=search.point_rules(points, concurrency, drop_tolerance))
            if health.observe(m, model=model, label=f"concurrency {concurrency}"):
                died = True  # the rest of the curve would measure a broken model
                break
            points.append(CurvePoint.measured(concurrency, m))
            if prof.steps and not step_failed:
                step_failed = _step_failures(check, m, model, step_times(m.server, list(prof.steps)))
            if m.problem():
                check.finding(f"{model}: concurrency {concurrency}: {m.problem()}", severity="warning", model=model)
            for note in m.too_close():
                check.finding(f"{model}: concurrency {concurrency} ({len(m.windows)} windows): {note}",
                              severity="info", model=model)
        points.sort(key=lambda p: p.concurrency)
        if search.reason:
            check.finding(f"{model}: the sweep stopped at concurrency {points[-1].concurrency if points else 0} "
                          f"(past the rule of thumb {search.rule_of_thumb}): {search.reason}", severity="info",
                          model=model)
        trusted = [p for p in points if p.trustworthy]
        _curve_charts(check, model, prof, points)
        for p in points:
            check.measure(f"throughput at concurrency {p.concurrency}", round(p.throughput_infer_s, 1), "infer/s", model=model)
            check.measure(f"p99 at concurrency {p.concurrency}", p.p99_ms, "ms", model=model)
            check.load_point(p.for_report(model))
        if died or step_failed:
            facts.withdraw(Capacity, model)  # no capacity for a model that lost an instance or whose steps fail
            continue
        if not enough_trusted(points):
            incomplete.append(f"{model}: only {len(trusted)} of {len(points)} curve points are stable and valid")
            continue
        knee_point = knee(points, knee_fraction)
        check.measure("knee concurrency", knee_point.concurrency, "requests", model=model)
        check.measure("knee throughput", round(knee_point.throughput_infer_s, 1), "infer/s", model=model)
        best = capacity(points, prof.budget_p99_ms, success_min)
        shape = check.mark()
        for problem in shape_problems(points, knee_point, drop_tolerance, prof.budget_p99_ms, prof.min_throughput):
            check.finding(f"{model}: {problem}", model=model, rule="PERF-2")
        check.judged_since(shape, "throughput does not fall before the knee, latency does not explode below the "
                           "target load", measured=f"{len(points)} curve points", model=model)
        for note in drops_inside_noise(points, drop_tolerance):
            check.finding(f"{model}: {note}", severity="info", model=model)
        if prof.min_throughput is None:
            check.finding(f"{model}: no min_throughput SLO, so 'latency explodes below the target load' is not "
                          "checked", severity="info", model=model)
        if not check.judge("some point keeps p99 within the budget", best is not None,
                           measured=f"p99 of {len(points)} curve points against {prof.budget_p99_ms:g} ms", model=model,
                           finding=f"{model}: no concurrency keeps p99 within {prof.budget_p99_ms:g} ms "
                                   f"({prof.budget_source})"):
            check.recommend(f"{model}: the model is slower than its budget even at concurrency 1: speed it up "
                            "(batching, a faster backend, more instances) or revisit the SLO.")
        lower_bound = search.capacity_is_lower_bound(points)
        found = Capacity(model, max_throughput_within_slo_infer_s=float(best.throughput_infer_s) if best else 0.0,
                         p99_ms=float(best.p99_ms if best else trusted[0].p99_ms),
                         concurrency=int(best.concurrency if best else trusted[0].concurrency),
                         instances=int(prof.instances), slo_p99_ms=prof.slo_p99_ms, lower_bound=lower_bound)
        facts.publish(found)
        check.measure("max throughput within SLO", round(found.max_throughput_within_slo_infer_s, 1),
                      "infer/s", model=model)
        check.measure("capacity is a lower bound", "yes" if lower_bound else "no", model=model)
        if lower_bound:
            check.finding(f"{model}: capacity >= {found.max_throughput_within_slo_infer_s:.0f} infer/s: "
                          f"throughput still rose within SLO at the search's bound (concurrency {points[-1].concurrency}, "
                          "curve_search_max_concurrency)", severity="warning", model=model)
        if prof.min_throughput is not None:
            check.measure("max throughput within SLO vs min_throughput",
                          round(found.max_throughput_within_slo_infer_s, 1), "infer/s", model=model,
                          threshold=prof.min_throughput, comparison=">=")
    return incomplete


def _curve_charts(check, model, prof, points):
    """Every point of the curve, each with its p99 interval where measured; untrustworthy points
    are drawn too and marked."""
    def marker(p):
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
        series[f"p99 {level} interval high"] = [(p.concurrency, round(p.p99_interval.high, 4)) for p in interval]
    series[f"budget {prof.budget_p99_ms:g} ms"] = [(p.concurrency, prof.budget_p99_ms) for p in points]
    check.chart(f"{model}: latency vs concurrency", "concurrency (requests in flight)", "latency (ms)", series)


@pytest.mark.triton_check("CFG-2")
def test_dynamic_batching_under_stress(triton, load, check, triton_facts):
    """At the saturation concurrency (2 x max_batch_size x instances) a dynamically batched model
    forms batches larger than 1 (near its preferred sizes when set); the queue share of latency is
    reported with the parameter to move when it is above batching_queue_share_max. Decoupled
    models are not driven here: where they are the only batched ones, INCOMPLETE says so. An
    ensemble is not judged itself (it has no scheduler of its own): its steps are, as models.
    """
    require_allowed(check, triton.settings, "saturate", "the batching check drives every batched model to saturation")
    settings = triton.settings
    # an ensemble has no scheduler of its own: its steps batch, and are measured as models of their own
    profiles = [p for p in _profiles(triton) if p.max_batch_size > 0 and not p.sequence and p.pipeline != "ensemble"]
    streamed = [m for m in ready_decoupled_models(triton) if "dynamic_batching" in triton.client.model_config(m)]
    if not profiles and streamed:
        check.incomplete(f"{', '.join(streamed)}: decoupled with dynamic batching, and this check drives unary "
                         "models only: batching under streaming load is not verified")
    if not profiles:
        check.not_applicable("no READY model in scope can batch (max_batch_size > 0, no sequence batcher)")
    for model in streamed:
        check.finding(f"{model}: decoupled with dynamic batching: its batching under streaming load is not verified "
                      "by this check", severity="warning", model=model)
    batched = [p for p in profiles if p.dynamic_batching is not None]
    for prof in profiles:
        if prof.dynamic_batching is None:
            check.finding(f"{prof.model}: max_batch_size {prof.max_batch_size} but no dynamic_batching: every "
                          "request runs alone", severity="warning", model=prof.model)
            check.recommend(f"{prof.model}: add `dynamic_batching {{ }}` to config.pbtxt so concurrent requests share executions.")
    if not batched:
        check.not_applicable("no model in scope uses dynamic batching")
    health = LoadHealth(triton, check, triton_facts)
    untrusted = None
    try:
        untrusted = _stress(load, check, health, batched)
        if settings.triton_tune_batching:
            _tune_batching(triton, load, check, [p for p in batched if not health.skip(p.model)
                                                 and not any(d.model == p.model for d in health.deaths.values())],
                           int(check.threshold("curve_max_concurrency").value))
    finally:
        health.finish()
    _untrusted(check, "; ".join(untrusted) if untrusted else None)


def _stress(load, check, health, batched):
    cap = int(check.threshold("curve_max_concurrency").value)
    min_batch = check.threshold("batching_min_average_batch_size")
    queue_max = check.threshold("batching_queue_share_max").value
    untrusted = []
    for number, prof in enumerate(batched, start=1):
        model = prof.model
        if health.skip(model):
            continue
        concurrency = min(prof.saturation_concurrency, cap) if cap > 0 else prof.saturation_concurrency
        progress.step(f"{model}: batching at saturation, concurrency {concurrency} (model {number} of {len(batched)})")
        rule = Rule("average batch size", "average batch size", ">", float(min_batch.value), "requests")
        measurement = load.measure(model, concurrency=concurrency, judge=[rule])
        check.measure("saturation concurrency", concurrency, "requests", model=model)
        if health.observe(measurement, model=model, label=f"concurrency {concurrency}"):
            continue
        check.measure("throughput", round(measurement.stats.throughput_infer_s, 1), "infer/s", model=model)
        check.measure("p99 latency", measurement.stats.p99_ms, "ms", model=model)
        check.measure("windows measured", len(measurement.windows), "windows", model=model)
        check.evidence(f"{model}: window stability (evidence, not a gate)", measurement.stability_detail)
        server = measurement.server_model
        if not measurement.trustworthy or server is None or server.average_batch_size is None:
            why = (measurement.problem() or (measurement.server and measurement.server.mixed_servers)
                   or "the server statistics gave no batch size")
            untrusted.append(f"{model}: {why}")
            continue
        judged = measurement.judgement("average batch size")
        batch = judged.value if judged.value is not None else server.average_batch_size
        too_close = record_judgement(check, judged, model=model, threshold=min_batch, digits=2,
                                     finding=f"{model}: batches stay at {batch:.2f} requests under saturation")
        if too_close:
            untrusted.append(too_close)
        check.measure("max_queue_delay_microseconds", prof.max_queue_delay_us, "us", model=model)
        preferred = prof.preferred_batch_sizes
        if far_from_preferred(batch, preferred, check.threshold("batching_preferred_fraction").value):
            check.finding(f"{model}: average batch {batch:.1f} is far from the preferred sizes {preferred}",
                          severity="warning", model=model)
        share = server.queue_share
        if share is not None:
            check.measure("queue share of server latency", round(share, 3), "ratio", model=model)
        advice = batching_advice(prof, batch, share, queue_max)
        if advice:
            check.finding(f"{model}: {advice[0]}", severity="warning" if batch > min_batch.value else "error", model=model)
            check.recommend(f"{model}: {advice[1]}")
        _record_server_side(check, measurement, model, prof.steps)
    return untrusted


def _tune_batching(triton, load, check, profiles, cap):
    """--triton-tune-batching: reload each model with a few max_queue_delay_microseconds values,
    measure each at saturation, recommend the best within the budget, restore the original config."""
    from pytest_triton_ready.load.tuning import tune_queue_delay

    delays = triton.settings.section_model("performance").tune_queue_delays_us
    for prof in profiles:
        outcome = tune_queue_delay(triton, load, prof, delays, cap)
        if outcome.skipped:
            check.finding(f"{prof.model}: batching not tuned: {outcome.skipped}", severity="warning", model=prof.model)
            continue
        for delay, point in outcome.points.items():
            check.measure(f"throughput at max_queue_delay {delay} us", round(point.throughput_infer_s, 1), "infer/s",
                          model=prof.model)
            check.measure(f"p99 at max_queue_delay {delay} us", point.p99_ms, "ms", model=prof.model)
        check.chart(f"{prof.model}: max_queue_delay_microseconds sweep", "max_queue_delay (us)", "latency (ms)",
                    {"p99": [(d, p.p99_ms) for d, p in outcome.points.items() if p.trustworthy]})
        if not outcome.restored:
            check.finding(f"{prof.model}: the original config could not be restored: {outcome.restore_error}",
                          model=prof.model)
        if outcome.best is not None:
            check.recommend(f"{prof.model}: set max_queue_delay_microseconds to {outcome.best} (measured best "
                            f"throughput within the {prof.budget_p99_ms:g} ms p99 budget; now {prof.max_queue_delay_us}).")


@pytest.mark.triton_check("PERF-1", blocking=False)
def test_gpu_utilization_under_load(triton, load, gpu, check):
    """Under saturating load the GPUs are busy within the gpu_utilization_min..max band (70-85%):
    lower wastes the GPU, pinned at the top with a growing queue means the deployment needs more.
    Decoupled models are not driven here: where they are all the deployment serves, INCOMPLETE."""
    if not gpu.read():
        check.not_applicable(f"no GPU to read: {gpu.unavailable_reason}")
    require_allowed(check, triton.settings, "saturate", "the GPU utilization check drives every model to saturation")
    profiles = _profiles(triton)
    if not profiles and ready_decoupled_models(triton):
        check.incomplete("every READY model in scope is decoupled: GPU utilization under streaming load is not "
                         "measured (no streaming counterpart of this advisory item yet)")
    if not profiles:
        check.incomplete("no READY model in scope to load the GPU with")
    cap = int(check.threshold("curve_max_concurrency").value)
    concurrency = {p.model: (min(p.saturation_concurrency, cap) if cap > 0 else p.saturation_concurrency)
                   for p in profiles}
    rules = load.rules()
    traffic = load.closed_loop(concurrency, warmup_s=rules.warmup_s, window_s=rules.window_s, bin_s=None,
                               server_stats=True, duration_s=rules.window_s * rules.stability_windows + 0.05)
    result = load.run(traffic)
    windows = [w for w in result.windows if w.server and w.server.gpu_utilization is not None]
    if not windows:
        check.incomplete("GPU utilization could not be read during the load")
    utilization = sum(w.server.gpu_utilization for w in windows) / len(windows)
    low, high = check.threshold("gpu_utilization_min"), check.threshold("gpu_utilization_max")
    check.chart("GPU utilization under load", "time (s)", "utilization (%)",
                {"GPU": [(round(w.end_s, 2), round(w.server.gpu_utilization * 100, 1)) for w in windows]})
    check.measure("throughput (all models)", round(result.stats.throughput_infer_s, 1), "infer/s")
    memory = [w.server.gpu_memory_used_fraction for w in windows if w.server.gpu_memory_used_fraction is not None]
    if memory:
        check.measure("GPU memory used (peak)", round(max(memory), 3), "ratio")
    if not check.measure("GPU utilization (mean)", round(utilization, 3), "ratio", threshold=low, comparison=">="):
        check.recommend("The GPU idles under saturating load: add model instances (instance_group count) or "
                        "enable/enlarge dynamic batching so each execution carries more work.")
    # the models driven, not their pipelines' steps (whose pending requests are the same requests again)
    pending = [sum(m.pending_requests or 0 for name, m in w.server.models.items() if name in concurrency)
               for w in windows]
    growing = len(pending) >= 2 and pending[-1] > pending[0]
    if not check.measure("GPU utilization (mean) under the band's top", round(utilization, 3), "ratio",
                         threshold=high, comparison="<=",
                         finding=f"GPU utilization {utilization:.0%} is above {high.value:.0%}"
                                 + (" with a growing queue" if growing else "")):
        check.recommend("The GPU is saturated: add a GPU or replica (scale out) before the queue grows; "
                        f"pending requests rose from {pending[0]:.0f} to {pending[-1]:.0f}." if growing
                        else "The GPU runs at the top of its band: plan capacity before traffic grows.")
