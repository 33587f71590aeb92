"""PERF-5: no regression against a baseline run (`--triton-baseline=PATH`, YAML `report.baseline`).

The baseline is a previous run's readiness.json, or a directory of runs (the newest READY one).
The rules live in pytest_triton_ready/baseline (compare.py, noise.py, record.py); this check gathers this run's key
numbers (what PERF-1..4 recorded earlier in the run) and measures the window-to-window noise at each
model's capacity point, which decides whether a difference is a change or the runs' own noise. A
regression of capacity or of p50/p99 not decided on its first look gets a planned second look: the noise
measurement is a second measurement of capacity at the same concurrency, and p50/p99 are measured
once more at PERF-1's target load (its `TargetLoad` fact). A decoupled (streaming) model has no windows:
its noise is the spread of a few streaming measurements at PERF-2's best concurrency
(its `StreamingCapacity` fact), whose mean tokens/s is also the repeat of its token capacity.
"""

import pytest

from pytest_triton_ready.baseline import key_numbers
from pytest_triton_ready.baseline.noise import measure_noise
from pytest_triton_ready.baseline.record import baseline_for, compare_runs, measure_regressions_again, record_comparisons
from pytest_triton_ready.server.models import ready_decoupled_models, ready_models

pytestmark = pytest.mark.usefixtures("triton")


@pytest.mark.triton_check("PERF-5", run_last=True)
def test_no_regression_against_baseline(triton, load, check, triton_run, triton_facts, triton_settings):
    """Against a baseline run, no model loses more than regression_capacity_drop_max of its capacity,
    p50/p99 at the target load rise no more than their regression thresholds, and soak drift, memory
    slopes, recovery times and error rates do not grow beyond theirs; a difference within the two
    runs' noise band (capped at each rule's threshold) is reported beside each change, and a capacity
    or latency regression gets a planned second look, each look at alpha / 2 (Bonferroni): it stands
    where the first look decided it, and is cleared (not reproduced) only where the second look's
    interval lies within the rule; within by value only, it is too close to call (INCOMPLETE)."""
    baseline = baseline_for(check, triton_settings.triton_baseline, triton_settings.readiness_report)
    measured = measure_noise(triton, load, check, triton_facts, ready_models(triton), ready_decoupled_models(triton))
    comparisons = compare_runs(check, key_numbers(triton_run.results), triton_run.collect_context(), baseline, measured)
    comparisons = measure_regressions_again(check, load, triton_facts, comparisons, measured)
    record_comparisons(check, comparisons, baseline)
