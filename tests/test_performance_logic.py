"""PERF-1, PERF-2, CFG-2 and the GPU band as the package decides them (load/benchmark.py,
load/sweep.py, load/batching_stress.py, load/gpu_load.py), on recorded windows: the same
verdicts the checks gave when this logic lived in checks/test_performance.py."""

from __future__ import annotations

import random

import pytest

from pytest_triton_ready.facts import Capacity, Facts, TargetLoad
from pytest_triton_ready.load.batching_stress import saturation_concurrency
from pytest_triton_ready.load.benchmark import benchmark, success_finding
from pytest_triton_ready.load.engine import measurement_from
from pytest_triton_ready.load.gpu_load import judge_utilization_band, pending_requests
from pytest_triton_ready.load.judged import incomplete_unless_failed
from pytest_triton_ready.load.measured_models import budget_note
from pytest_triton_ready.load.profile import ModelProfile
from pytest_triton_ready.load.stability import MeasureRules
from pytest_triton_ready.load.stats import Tally
from pytest_triton_ready.load.sweep import SweepLimits, sweep
from pytest_triton_ready.load.traffic import TrafficResult, Window
from pytest_triton_ready.recorder import CheckRecorder
from pytest_triton_ready.report.model import Result, Verdict
from pytest_triton_ready.thresholds import THRESHOLDS, ThresholdValue

RULES = MeasureRules()


def _check(check_id: str = "PERF-1") -> CheckRecorder:
    settings = type("S", (), {"threshold": staticmethod(lambda name: ThresholdValue(
        name, THRESHOLDS[name].default, THRESHOLDS[name].unit, "default"))})()
    return CheckRecorder(Result(check_id, "performance", "t", "checks/test_performance.py::t"), settings)


def _profile(budget_ms: float = 100.0, slo: float | None = 100.0, max_batch_size: int = 0) -> ModelProfile:
    return ModelProfile("m", max_batch_size, 1, None, False, budget_ms, "slo" if slo else "default threshold", slo, None)


def windows_at(p99_ms: float, per_window: int, count: int, spread: float = 0.0, seed: int = 3,
               window_s: float = 2.0) -> list[Window]:
    """Recorded windows of model "m": `per_window` answers a window, latencies uniform over
    [0.2, 1] x a top that puts the p99 at `p99_ms`, each window scaled by up to +-`spread`."""
    rng = random.Random(seed)
    top_s = p99_ms / 1000.0 / (0.2 + 0.8 * 0.99)
    windows = []
    for i in range(count):
        scale = 1.0 + rng.uniform(-spread, spread)
        tally = Tally(started=i * window_s, ended=(i + 1) * window_s)
        for _ in range(int(per_window * rng.uniform(1 - spread, 1 + spread))):
            tally.ok(top_s * scale * rng.uniform(0.2, 1.0))
        stats = tally.summary(window_s)
        windows.append(Window(i, i * window_s, (i + 1) * window_s, stats, {"m": stats}, tallies={"m": tally}))
    return windows


class RecordedLoad:
    """Plays recorded windows back as the load engine's measurements: `curve` maps a concurrency
    (None: any other) to (p99 ms, answers per window); a measurement stops where the engine would."""

    def __init__(self, curve: dict[int, tuple[float, int]], spread: float = 0.0) -> None:
        self.curve, self.spread, self.measured = curve, spread, []
        self.client = object()

    def rules(self, **overrides):
        return MeasureRules(**{**RULES.__dict__, **overrides})

    def measure(self, model, *, concurrency=None, rate=None, poisson=False, rules=None, judge=None):
        from pytest_triton_ready.load.engine import measurement_done

        rules = rules or RULES
        p99, per_window = self.curve.get(concurrency) or self.curve[None]
        windows = windows_at(p99, per_window, rules.max_windows, self.spread, seed=concurrency)
        n = next(n for n in range(1, len(windows) + 1) if measurement_done(windows[:n], rules, judge, model)
                 or n == len(windows))
        self.measured.append((concurrency, n))
        last = windows[n - 1]
        result = TrafficResult(last.stats, {model: last.stats}, windows[:n], None, [w.tallies for w in windows[:n]],
                               "closed", 0.0, last.end_s)
        return measurement_from(model, result, rules, concurrency, rate, "grpc", judged=judge)


class QuietHealth:
    """No instance dies: what LoadHealth says of a server whose models stay up."""

    deaths: dict = {}

    def skip(self, model):
        return False

    def observe(self, measurement, **_):
        return []


def test_perf1_passes_a_model_far_inside_its_budget_and_publishes_its_target_load():
    check, facts = _check(), Facts()
    undecided = benchmark(RecordedLoad({None: (4.0, 400)}), check, QuietHealth(), [_profile()], facts)
    assert undecided is None and not check.errors
    target = int(THRESHOLDS["perf_target_concurrency"].default)
    assert facts.get(TargetLoad, "m") == TargetLoad("m", concurrency=target)
    assert {m.name for m in check.result.measurements} >= {"p99 latency", "success rate", "throughput"}


def test_perf1_fails_a_model_decidedly_over_its_budget_naming_the_interval():
    check = _check()
    benchmark(RecordedLoad({None: (250.0, 400)}), check, QuietHealth(), [_profile()], Facts())
    assert [f.message for f in check.errors if "exceeds the 100 ms budget" in f.message]
    assert "interval" in check.errors[0].message


def test_perf1_leaves_a_budget_inside_the_noise_too_close_to_call():
    undecided = benchmark(RecordedLoad({None: (100.0, 400)}, spread=0.3), _check(), QuietHealth(), [_profile()], Facts())
    assert undecided.startswith("not decided: ") and "too close to call: p99 latency" in undecided


def test_perf2_sweeps_to_the_plateau_and_publishes_the_capacity_within_slo():
    curve = {1: (2.0, 400), 2: (2.5, 800), 4: (3.0, 1600), 8: (5.0, 1700), 16: (9.0, 1720), 32: (30.0, 1720)}
    check, facts, load = _check("PERF-2"), Facts(), RecordedLoad(curve)
    limits = SweepLimits.of(check)
    assert sweep(load, check, QuietHealth(), [_profile()], facts, limits) == []
    found = facts.get(Capacity, "m")
    assert found.concurrency in (8, 16) and not found.lower_bound
    assert [c for c, _ in load.measured][:4] == [1, 2, 4, 8]
    assert not check.errors
    assert len(check.result.load_points) == len(load.measured)


def test_perf2_fails_where_no_point_keeps_p99_within_the_budget():
    curve = {c: (400.0, 100 * c) for c in (1, 2, 4, 8, 16)}
    check, facts = _check("PERF-2"), Facts()
    sweep(RecordedLoad(curve), check, QuietHealth(), [_profile()], facts, SweepLimits.of(check))
    assert any("no concurrency keeps p99 within 100 ms" in f.message for f in check.errors)
    assert facts.get(Capacity, "m").max_throughput_within_slo_infer_s == 0.0


def test_the_curve_charts_draw_every_point_and_the_budget():
    check = _check("PERF-2")
    load = RecordedLoad({1: (2.0, 400), 2: (2.5, 800), 4: (3.0, 800), 8: (6.0, 800), 16: (12.0, 800)})
    sweep(load, check, QuietHealth(), [_profile()], Facts(), SweepLimits.of(check))
    points = len(load.measured)
    by_title = {c.title: c for c in check.result.charts}
    assert list(by_title) == ["m: latency vs throughput", "m: latency vs concurrency"]
    series = {s.name: s.points for s in by_title["m: latency vs concurrency"].series}
    assert len(series["p99"]) == points and len(series["p99 95% interval high"]) == points
    assert {y for _, y in series["budget 100 ms"]} == {100.0}


def test_an_undecided_measurement_is_incomplete_unless_the_check_already_failed():
    check = _check()
    with pytest.raises(pytest.skip.Exception):
        incomplete_unless_failed(check, "m: too close to call")
    assert check.result.verdict == Verdict.INCOMPLETE
    failed = _check()
    failed.finding("m: p99 over budget")
    incomplete_unless_failed(failed, "n: too close to call")
    assert failed.result.verdict != Verdict.INCOMPLETE
    assert [f.severity for f in failed.result.findings] == ["error", "warning"]
    incomplete_unless_failed(_check(), None)  # nothing undecided: nothing said


def test_a_budget_without_a_p99_slo_is_named():
    check = _check()
    budget_note(check, _profile(slo=None))
    budget_note(check, _profile())
    assert [f.message for f in check.result.findings] == [
        "m: no p99 SLO configured; 'within SLO' uses the default threshold of 100 ms"]


def test_the_success_finding_names_the_commonest_errors():
    stats = type("S", (), {"errors": {"timeout": 3, "refused": 9, "reset": 1, "other": 2}, "success_rate": 0.9})()
    assert success_finding("m", stats, 0.999) == ("m: success rate 90.00% is below 0.999; errors: refused (9x), "
                                                  "timeout (3x), other (2x)")


def test_saturation_concurrency_is_capped_by_curve_max_concurrency():
    prof = _profile(max_batch_size=8)
    assert (saturation_concurrency(prof, 0), saturation_concurrency(prof, 4)) == (16, 4)


def test_the_gpu_band_names_the_way_out_on_each_side():
    low = _check()
    judge_utilization_band(low, 0.30, [0, 0])
    assert low.errors and "add model instances" in low.result.recommendations[0]
    high = _check()
    judge_utilization_band(high, 0.97, [1, 9])
    assert any("with a growing queue" in f.message for f in high.errors)
    assert "pending requests rose from 1 to 9" in high.result.recommendations[0]
    inside = _check()
    judge_utilization_band(inside, 0.78, [2, 2])
    assert not inside.errors


def test_pending_requests_count_the_models_driven_not_their_steps():
    model = type("M", (), {})
    driven, step = model(), model()
    driven.pending_requests, step.pending_requests = 3, 3
    window = type("W", (), {"server": type("S", (), {"models": {"pipeline": driven, "step": step}})()})()
    assert pending_requests([window], {"pipeline": 4}) == [3]
