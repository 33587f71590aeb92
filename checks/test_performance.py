"""Phase "performance" (and CFG-2, which verifies the batching config under stress).

Every number comes from the load engine's windowed measurements (docs/load-engine.md): warm-up
excluded, valid by minimum duration and request count, each rule decided with confidence
(load/decision.py) or INCOMPLETE "too close to call". The checks hold the rules' wiring; what
they measure and how they judge it lives in pytest_triton_ready/load/: benchmark.py (PERF-1),
sweep.py (PERF-2), batching_stress.py (CFG-2), gpu_load.py (the GPU band).
"""

import pytest

from pytest_triton_ready.config.batching_stress import batched_in_scope, saturation_concurrency, stress
from pytest_triton_ready.config.tuning import tune_batching
from pytest_triton_ready.health import LoadHealth
from pytest_triton_ready.load.judged import incomplete_unless_failed
from pytest_triton_ready.performance.benchmark import benchmark
from pytest_triton_ready.performance.gpu_load import gpu_utilization_under_load
from pytest_triton_ready.performance.measured_models import profiles_in_scope
from pytest_triton_ready.performance.sweep import SweepLimits, sweep
from pytest_triton_ready.policy import require_allowed
from pytest_triton_ready.server.models import defer_to_streaming, ready_decoupled_models

pytestmark = pytest.mark.usefixtures("triton")


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
    profiles = profiles_in_scope(triton, check)
    defer_to_streaming(check, triton, [p.model for p in profiles])
    if not profiles:
        check.incomplete("no READY model in scope to benchmark")
    health = LoadHealth(triton, check, triton_facts, [p.model for p in profiles])
    undecided = None
    try:
        undecided = benchmark(load, check, health, profiles, triton_facts)
    finally:
        health.finish()
    incomplete_unless_failed(check, undecided)


@pytest.mark.triton_check("PERF-2")
def test_throughput_latency_curve(triton, load, check, triton_facts):
    """Sweeping concurrency until the capacity is found, throughput never falls as concurrency rises
    before the knee, latency does not explode below the target load, and some point is within the
    latency budget; the curve, its knee and the capacity within SLO are reported.

    The sweep doubles concurrency up to 2 x max_batch_size x instances (ending earlier on a
    plateau: no gain over the last two doublings, by value or confirmed) and on past it while
    throughput still rises (curve_min_gain per doubling) within SLO and without errors, up to
    curve_search_max_concurrency, bisecting where p99 left the budget; stopped by that bound while
    still rising, the capacity is reported as a lower bound (">= N"). A model with fewer than half
    of its points (or two) stable and valid makes the check INCOMPLETE and publishes no capacity.
    Where no point is decidedly within the budget but some are by value (or have no interval),
    INCOMPLETE (too close to call), no capacity published; each point is judged at its share of the
    curve's error budget (docs/load-engine.md).
    Where every READY model in scope is decoupled, NOT APPLICABLE: test_streaming_tokens_and_ttft_curve
    sweeps streams and publishes their capacity."""
    profiles = profiles_in_scope(triton, check)
    defer_to_streaming(check, triton, [p.model for p in profiles])
    require_allowed(check, triton.settings, "saturate", "the throughput-latency sweep drives every model to saturation")
    if not profiles:
        check.incomplete("no READY model in scope to sweep")
    health = LoadHealth(triton, check, triton_facts, [p.model for p in profiles])
    undecided = None
    try:
        undecided = sweep(load, check, health, profiles, triton_facts, SweepLimits.of(check))
    finally:
        health.finish()
    incomplete_unless_failed(check, "; ".join(undecided) if undecided else None)


@pytest.mark.triton_check("CFG-2")
def test_dynamic_batching_under_stress(triton, load, check, triton_facts):
    """At the saturation concurrency (2 x max_batch_size x instances) a dynamically batched model
    forms batches larger than 1 (near its preferred sizes when set); the queue share of latency is
    reported with the parameter to move when it is above batching_queue_share_max. Decoupled
    models are not driven here: where they are the only batched ones, INCOMPLETE says so. An
    ensemble is not judged itself (it has no scheduler of its own): its steps are, as models.
    """
    require_allowed(check, triton.settings, "saturate", "the batching check drives every batched model to saturation")
    batched = batched_in_scope(triton, check, profiles_in_scope(triton))
    health = LoadHealth(triton, check, triton_facts)
    undecided = None
    try:
        undecided = stress(load, check, health, batched)
        if triton.settings.triton_tune_batching:
            alive = [p for p in batched if not health.skip(p.model)
                     and not any(d.model == p.model for d in health.deaths.values())]
            tune_batching(triton, load, check, alive, int(check.threshold("curve_max_concurrency").value))
    finally:
        health.finish()
    incomplete_unless_failed(check, "; ".join(undecided) if undecided else None)


@pytest.mark.triton_check("PERF-1", blocking=False)
def test_gpu_utilization_under_load(triton, load, gpu, check):
    """Under saturating load the GPUs are busy within the gpu_utilization_min..max band (70-85%):
    lower wastes the GPU, pinned at the top with a growing queue means the deployment needs more.
    Decoupled models are not driven here: where they are all the deployment serves, INCOMPLETE."""
    if not gpu.read():
        check.not_applicable(f"no GPU to read: {gpu.unavailable_reason}")
    require_allowed(check, triton.settings, "saturate", "the GPU utilization check drives every model to saturation")
    profiles = profiles_in_scope(triton)
    if not profiles and ready_decoupled_models(triton):
        check.incomplete("every READY model in scope is decoupled: GPU utilization under streaming load is not "
                         "measured (no streaming counterpart of this advisory item yet)")
    if not profiles:
        check.incomplete("no READY model in scope to load the GPU with")
    cap = int(check.threshold("curve_max_concurrency").value)
    gpu_utilization_under_load(load, check, {p.model: saturation_concurrency(p, cap) for p in profiles})
