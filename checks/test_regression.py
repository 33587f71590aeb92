"""PERF-5: no regression against a baseline run (`--triton-baseline=PATH`, YAML `report.baseline`).

The baseline is a previous run's readiness.json, or a directory of runs (the newest READY one).
The rules live in pytest_triton_ready/baseline (compare.py); this check gathers this run's key
numbers (what PERF-1..4 recorded earlier in the run) and measures the window-to-window noise at each
model's capacity point, which decides whether a difference is a change or the runs' own noise. A
regression of capacity or of p50/p99 is measured again before it fails the check: the noise
measurement is a second measurement of capacity at the same concurrency, and p50/p99 are measured
once more at PERF-1's target load (its `TargetLoad` fact). A decoupled (streaming) model has no windows:
its noise is the spread of STREAMING_REPEATS streaming measurements at PERF-2's best concurrency
(its `StreamingCapacity` fact), whose mean tokens/s is also the repeat of its token capacity.
"""

import hashlib
import json
import math
import statistics

import pytest

from pytest_triton_ready.baseline import (
    NOT_REPRODUCED,
    REGRESSION,
    REPEATABLE,
    WITHIN_NOISE,
    BaselineError,
    compare,
    environment_differences,
    key_numbers,
    load_baseline,
    model_label,
    reconsider,
)
from pytest_triton_ready.baseline.keynumbers import CONFIG_DIGEST, NOISE_NAMES
from pytest_triton_ready.facts import Capacity, StreamingCapacity, TargetLoad
from pytest_triton_ready.load.streaming_rules import measurement_problem, streaming_slo
from pytest_triton_ready.models import ready_decoupled_models, ready_models

pytestmark = pytest.mark.usefixtures("triton")


def _relative_standard_error(values):
    """Standard error of the windows' mean, relative to it: the noise of the run's number."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if len(values) < 2 or not statistics.fmean(values):
        return None
    return statistics.stdev(values) / abs(statistics.fmean(values)) / math.sqrt(len(values))


def _window_noise(measurement, model, windows_used):
    windows = measurement.windows[-windows_used:] if windows_used > 0 else measurement.windows
    stats = [w.by_model.get(model, w.stats) for w in windows]
    return {"throughput": _relative_standard_error([s.throughput_infer_s for s in stats]),
            "p50": _relative_standard_error([s.p50_ms for s in stats]),
            "p99": _relative_standard_error([s.p99_ms for s in stats])}


def _repeat_at_target(load, check, model, target):
    """p50/p99 measured once more at PERF-1's target load (its concurrency or Poisson rate)."""
    if target is not None and target.rate:
        measurement = load.measure(model, rate=float(target.rate), poisson=True, server_stats=False)
        where = f"{target.rate:g} infer/s offered"
    else:
        concurrency = int((target.concurrency if target else None) or check.threshold("perf_target_concurrency").value)
        measurement = load.measure(model, concurrency=concurrency, server_stats=False)
        where = f"concurrency {concurrency}"
    check.measure("repeat at target load", where, model=model)
    if not measurement.trustworthy:
        check.finding(f"{model}: the repeat at the target load is not trustworthy ({measurement.problem()}); "
                      "the first measurement stands", severity="warning", model=model)
        return {}
    return {"p50": measurement.stats.p50_ms, "p99": measurement.stats.p99_ms}


STREAMING_REPEATS = 3


def _streaming_noise(triton, check, model, fact):
    """({noise kind: relative standard error}, {key: repeat value}) from STREAMING_REPEATS streaming
    measurements of `model` at the concurrency of PERF-2's best point; a repeat counts for the
    token capacity only when every measurement is valid and its mean TTFT p99 within the SLO."""
    from pytest_triton_ready.load.streaming import StreamingLoad
    from pytest_triton_ready.load.streaming_requests import StreamingPlan

    client = triton.client
    plan = StreamingPlan.from_metadata(model, client.model_metadata(model), client.model_config(model))
    concurrency = int((fact.concurrency if fact else None) or check.threshold("streaming_concurrency").value)
    check.measure("streaming noise measured at concurrency", concurrency, "streams", model=model)
    runs = [StreamingLoad(triton.endpoints.grpc_url, plan, headers=triton.settings.headers, concurrency=concurrency,
                          duration_s=check.threshold("streaming_curve_point_s").value, warmup_s=0.5,
                          max_tokens=int(check.threshold("streaming_max_tokens").value),
                          deadline_s=check.threshold("streaming_final_deadline_s").value).run().stats
            for _ in range(STREAMING_REPEATS)]
    noise = {"streaming_tokens": _relative_standard_error([s.output_tokens_per_s for s in runs]),
             "streaming_ttft": _relative_standard_error([s.ttft_ms["p99"] for s in runs]),
             "streaming_itl": _relative_standard_error([s.itl_ms["p99"] for s in runs])}
    problems = [p for s in runs if (p := measurement_problem(
        s.completed, s.success_rate, len(s.stuck), success_min=check.threshold("success_rate_min").value,
        min_requests=int(check.threshold("streaming_min_requests").value)))]
    ttft = [s.ttft_ms["p99"] for s in runs if s.ttft_ms["p99"] is not None]
    budget = streaming_slo(triton.settings, model)["ttft_p99_ms"].value
    if problems or not ttft or statistics.fmean(ttft) > budget:
        check.finding(f"{model}: the streaming repeats do not stand for the token capacity ("
                      + ("; ".join(problems) if problems else f"mean TTFT p99 above the {budget:g} ms SLO") + ")",
                      severity="warning", model=model)
        return noise, {}
    return noise, {"tokens_capacity": statistics.fmean(s.output_tokens_per_s for s in runs)}


def _config_digest(config):
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


@pytest.mark.triton_check("PERF-5", run_last=True)
def test_no_regression_against_baseline(triton, load, check, triton_run, triton_facts, triton_settings):
    """Against a baseline run, no model loses more than regression_capacity_drop_max of its capacity,
    p50/p99 at the target load rise no more than their regression thresholds, and soak drift, memory
    slopes, recovery times and error rates do not grow beyond theirs; a difference within the two
    runs' noise band (capped at each rule's threshold) is reported beside each change, and a capacity
    or latency regression is cleared (not reproduced) only when the mean of this run's two
    measurements is within the rule."""
    if triton_settings.triton_baseline is None:
        check.incomplete("no baseline given: --triton-baseline=PATH (a previous readiness.json or a directory of "
                         "runs); waive PERF-5 under gate.waivers for a first run")
    try:
        baseline = load_baseline(triton_settings.triton_baseline, exclude=triton_settings.readiness_report)
    except BaselineError as exc:
        check.incomplete(f"baseline not usable: {exc}")
    check.measure("baseline", str(baseline.label))

    digests = {}
    noise = {}
    repeats = {}
    capacities = triton_facts.of(Capacity)
    windows_used = int(check.threshold("load_stability_windows").value)
    for model in ready_models(triton):
        digests[model] = _config_digest(triton.client.model_config(model))
        check.measure(CONFIG_DIGEST, digests[model], model=model)
        measured = capacities.get(model)
        concurrency = (measured.concurrency if measured else None) or int(check.threshold("perf_target_concurrency").value)
        measurement = load.measure(model, concurrency=int(concurrency), server_stats=False)
        check.measure("noise measured at concurrency", int(concurrency), "requests", model=model)
        noise[model] = _window_noise(measurement, model, windows_used)
        budget = measured.slo_p99_ms if measured else None
        if measurement.trustworthy and (budget is None or measurement.stats.p99_ms <= budget):
            repeats[model] = {"capacity": measurement.stats.throughput_infer_s}  # still within SLO there
        for kind, value in noise[model].items():
            if value is not None:
                check.measure(NOISE_NAMES[kind], round(value, 5), "ratio", model=model)
    streaming_capacity = triton_facts.of(StreamingCapacity)
    for model in ready_decoupled_models(triton):
        digests[model] = _config_digest(triton.client.model_config(model))
        check.measure(CONFIG_DIGEST, digests[model], model=model)
        noise[model], repeats[model] = _streaming_noise(triton, check, model, streaming_capacity.get(model))
        for kind, value in noise[model].items():
            if value is not None:
                check.measure(NOISE_NAMES[kind], round(value, 5), "ratio", model=model)

    current = key_numbers(triton_run.results)
    for model, spread in noise.items():
        current.setdefault(model, {}).update({f"noise_{k}": v for k, v in spread.items() if v is not None})
    here = {"context": triton_run.collect_context(), "results": []}
    for difference in environment_differences(here, baseline.document, digests):
        check.finding(f"compared across environments: {difference}", severity="warning")

    comparisons = compare(current, key_numbers(baseline.document), lambda name: check.threshold(name).value)
    if not comparisons:
        check.incomplete(f"nothing to compare: this run and the baseline {baseline.path} share no key number "
                         "(capacity, p50/p99, error rate, soak drift and slopes, recovery times) for a common model")
    targets = triton_facts.of(TargetLoad)
    for model in sorted({c.model for c in comparisons if c.status == REGRESSION and c.metric.key in REPEATABLE}):
        if any(c.model == model and c.status == REGRESSION and c.metric.key in ("p50", "p99") for c in comparisons):
            repeats.setdefault(model, {}).update(_repeat_at_target(load, check, model, targets.get(model)))
    comparisons = [reconsider(c, repeats[c.model][c.metric.key], lambda name: check.threshold(name).value)
                   if c.metric.key in repeats.get(c.model, {}) else c for c in comparisons]

    mark = check.mark()
    worst = max(comparisons, key=lambda c: c.worse_by / c.limit if c.limit else c.worse_by)
    check.measure("worst change against the baseline", f"{model_label(worst.model)}: {worst.metric.label} "
                  f"{worst.short_change()} ({worst.status})")
    for c in comparisons:
        unit = "ratio" if c.metric.relative else c.metric.unit
        check.measure(f"{c.metric.label}: change against the baseline ({c.status})", round(c.change, 4)
                      if math.isfinite(c.change) else str(c.change), unit, model=None if c.model == "*" else c.model)
        if c.status == REGRESSION:
            check.finding(f"regression: {c.describe()}", model=c.model, rule="PERF-5")
        elif c.status in (WITHIN_NOISE, NOT_REPRODUCED):
            check.finding(f"{c.status}: {c.describe()}", severity="info", model=c.model)
    check.judged_since(mark, "no-regression", measured=f"{len(comparisons)} key numbers against the baseline")
    regressions = [c for c in comparisons if c.status == REGRESSION]
    if regressions:
        models = sorted({model_label(c.model) for c in regressions})
        check.recommend(f"Find what changed for {', '.join(models)} since the baseline ({baseline.path}); if the change "
                        "is intended, make this run the new baseline.")
