"""PERF-1, PERF-2, CFG-2 and the GPU band as the package decides them (performance/benchmark.py,
performance/sweep.py, config/batching_stress.py, performance/gpu_load.py), on recorded windows: the same
verdicts the checks gave when this logic lived in checks/test_performance.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
from default_settings import default_settings
from recorded_windows import recorded_windows, traffic_result

from pytest_triton_ready.config.batching_stress import saturation_concurrency
from pytest_triton_ready.facts import Capacity, Facts, TargetLoad
from pytest_triton_ready.load.confidence import Interval
from pytest_triton_ready.load.decision import FAIL, UNDECIDED, slo_rules
from pytest_triton_ready.load.engine import measurement_done, measurement_from
from pytest_triton_ready.load.judged import incomplete_unless_failed
from pytest_triton_ready.load.profile import ModelProfile
from pytest_triton_ready.load.stability import MeasureRules
from pytest_triton_ready.load.traffic import TrafficResult, Window
from pytest_triton_ready.performance.benchmark import benchmark, success_finding
from pytest_triton_ready.performance.curve import OVER_BUDGET, PLATEAU, CapacitySearch, CurvePoint, capacity, falls
from pytest_triton_ready.performance.gpu_load import judge_utilization_band, pending_requests
from pytest_triton_ready.performance.measured_models import budget_note
from pytest_triton_ready.performance.sweep import SweepLimits, sweep
from pytest_triton_ready.record.model import Result, Verdict
from pytest_triton_ready.record.recorder import CheckRecorder
from pytest_triton_ready.thresholds import THRESHOLDS

RULES = MeasureRules(window_s=2.0, min_duration_s=6.0, max_windows=10)  # the recorded windows' rules: 2 s windows


def _check(check_id: str = "PERF-1") -> CheckRecorder:
    return CheckRecorder(Result(check_id, "performance", "t", "checks/test_performance.py::t"), default_settings())


def _profile(budget_ms: float = 100.0, slo: float | None = 100.0, max_batch_size: int = 0) -> ModelProfile:
    return ModelProfile("m", max_batch_size, 1, None, False, budget_ms, "slo" if slo else "default threshold", slo, None)


def windows_at(p99_ms: float, per_window: int, count: int, spread: float = 0.0, seed: int = 3,
               window_s: float = 2.0) -> list[Window]:
    """Recorded windows of model "m": `per_window` answers a window (moving by up to +-`spread`),
    latencies uniform over [0.2, 1] x a top that puts the p99 at `p99_ms`, each window scaled by up
    to +-`spread`."""
    return recorded_windows(p99_ms, count, per_window, spread, seed=seed, window_s=window_s, count_spread=True)


class RecordedLoad:
    """Plays recorded windows back as the load engine's measurements: `curve` maps a concurrency
    (None: any other) to (p99 ms, answers per window); a measurement stops where the engine would."""

    def __init__(self, curve: dict[int, tuple[float, int]], spread: float = 0.0) -> None:
        self.curve, self.spread, self.measured = curve, spread, []
        self.client = object()

    def rules(self, **overrides):
        return MeasureRules(**{**RULES.__dict__, **overrides})

    def measure(self, model, *, concurrency=None, rate=None, poisson=False, rules=None, judge=None, reuse=False):
        rules = rules or RULES
        p99, per_window = self.curve.get(concurrency) or self.curve[None]
        windows = windows_at(p99, per_window, rules.max_windows, self.spread, seed=concurrency)
        n = next(n for n in range(1, len(windows) + 1) if measurement_done(windows[:n], rules, judge, model)
                 or n == len(windows))
        self.measured.append((concurrency, n))
        self.rules_seen = [*getattr(self, "rules_seen", []), rules]
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
    undecided = benchmark(RecordedLoad({None: (4.0, 1600)}), check, QuietHealth(), [_profile()], facts)
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


# -- the capacity search spends its points where the answer is ----------------------------------------
def _search_points(search, curve):
    """Feed `search` points from `curve(concurrency) -> (throughput, p99)` until it stops: throughput
    without an interval, p99 with a narrow one (decided against the budget)."""
    points = []
    while (level := search.next_level(points)) is not None:
        throughput, p99 = curve(level)
        points.append(CurvePoint(level, throughput, p99 / 2, p99, 1.0, True,
                                 p99_interval=Interval(0.9 * p99, p99, 0.95)))
        assert len(points) < 40, "the search does not end"
    return points


def test_each_curve_point_is_judged_at_its_share_of_the_curves_error_budget():
    """Issue 31: 'some point keeps p99 within the budget' was a union over the points, each at the
    check's 95%. The search plans at most 5 points to the rule of thumb (1 ... 16), 5 doublings
    past it to 512 and 2 bisections: each point at 1 - 0.05 / 12."""
    search = CapacitySearch(max_batch_size=8, instances=1, budget_p99_ms=100, success_min=0.999, max_concurrency=512)
    assert search.planned_points == 12
    assert CapacitySearch(8, 1, 100, 0.999, max_concurrency=16, bisect_steps=0).planned_points == 5
    curve = {1: (2.0, 400), 2: (2.5, 800), 4: (3.0, 1600), 8: (5.0, 1700), 16: (9.0, 1720), 32: (30.0, 1720)}
    check, load = _check("PERF-2"), RecordedLoad(curve)
    limits = SweepLimits.of(check)
    sweep(load, check, QuietHealth(), [_profile(max_batch_size=8)], Facts(), limits)
    planned = CapacitySearch(8, 1, 100, 0.999, max_concurrency=limits.cap or limits.search_max_concurrency)
    assert load.rules_seen and {r.shares for r in load.rules_seen} == {planned.planned_points}
    each = load.rules_seen[0]
    assert each.look_level == pytest.approx(1 - (1 - RULES.confidence) / (len(RULES.look_windows) * planned.planned_points))
    assert each.confidence == RULES.confidence  # the intervals are labelled with the curve's confidence


def test_a_plateau_before_the_rule_of_thumb_ends_the_sweep():
    search = CapacitySearch(max_batch_size=32, instances=2, budget_p99_ms=100, success_min=0.999)  # rule: 128
    points = _search_points(search, lambda c: (min(c, 4) * 500.0, 1.0 + c / 10))
    assert [p.concurrency for p in points] == [1, 2, 4, 8, 16]  # was 1 ... 128, then 256
    assert search.reason == PLATEAU and not search.capacity_is_lower_bound(points)
    assert capacity(points, 100, 0.999).throughput_infer_s == 2000.0


def test_a_plateau_below_the_min_throughput_target_is_swept_on():
    search = CapacitySearch(max_batch_size=32, instances=2, budget_p99_ms=100, success_min=0.999,
                            target_throughput=5000.0)
    points = _search_points(search, lambda c: (min(c, 4) * 500.0, 1.0 + c / 10))
    assert [p.concurrency for p in points] == [1, 2, 4, 8, 16, 32, 64, 128]


def test_a_rise_that_continues_is_not_a_plateau():
    search = CapacitySearch(max_batch_size=8, instances=1, budget_p99_ms=100, success_min=0.999)  # rule: 16
    points = _search_points(search, lambda c: (1000.0 + 30.0 * c, 1.0))  # +3% a doubling at first, then more
    assert [p.concurrency for p in points][:5] == [1, 2, 4, 8, 16]


def test_no_bisection_between_points_whose_throughput_does_not_gain():
    search = CapacitySearch(max_batch_size=2, instances=1, budget_p99_ms=50, success_min=0.999)  # rule: 4
    points = _search_points(search, lambda c: (min(c, 32) * 100.0 + (50.0 if c > 32 else 0.0), c * 1.0))
    assert [p.concurrency for p in points] == [1, 2, 4, 8, 16, 32, 64]  # 48 and 56 cannot raise the capacity
    assert search.reason == OVER_BUDGET and capacity(points, 50, 0.999).concurrency == 32


def _decided_best(concurrency: int, throughput: float) -> CurvePoint:
    return CurvePoint(concurrency, throughput, 5.0, 10.0, 1.0, True,
                      throughput_interval=Interval(throughput * 0.99, throughput * 1.01, 0.95),
                      p99_interval=Interval(9.0, 11.0, 0.95))


def test_a_point_below_the_capacity_so_far_stops_without_deciding_its_p99():
    search = CapacitySearch(max_batch_size=32, instances=2, budget_p99_ms=100, success_min=0.999)
    at_budget = windows_at(p99_ms=100.0, per_window=400, count=10, spread=0.1)  # 200 infer/s
    alone = search.point_rules([], 8, 0.10)
    assert _stops_after(at_budget, alone) == 10  # nothing else measured: it tries to decide its p99
    below = search.point_rules([_decided_best(4, 2000.0)], 8, 0.10)
    stop = _stops_after(at_budget, below)
    assert stop == 3  # decidedly under 2000 x 1.05 infer/s at the first look: the p99 question is moot
    measured = measurement_from("m", traffic_result(at_budget[:stop]), RULES, 8, None, "grpc", judged=below)
    p99 = measured.judgement("p99 latency")
    assert p99.outcome == UNDECIDED and p99.settled and p99.moot is not None
    assert measured.too_close() == []
    assert not CurvePoint.measured(8, measured).within_budget(100.0)  # never counted as within the budget


def test_a_point_that_may_raise_the_capacity_still_decides_its_p99():
    search = CapacitySearch(max_batch_size=32, instances=2, budget_p99_ms=100, success_min=0.999)
    at_budget = windows_at(p99_ms=100.0, per_window=400, count=10, spread=0.1)  # 200 infer/s
    rules = search.point_rules([_decided_best(4, 150.0)], 8, 0.10)  # 200 infer/s may well be the capacity
    assert _stops_after(at_budget, rules) == 10


def test_a_curve_point_inside_its_noise_stops_at_the_first_look_when_the_budget_would_not_decide_it():
    search = CapacitySearch(max_batch_size=32, instances=2, budget_p99_ms=100, success_min=0.999)
    noisy = windows_at(p99_ms=100.0, per_window=400, count=10, spread=0.3)  # +-30% from window to window
    sweep_rules = search.point_rules([], 8, 0.10)
    stop = _stops_after(noisy, sweep_rules)
    assert stop == 3  # was 10: the p99 interval narrowed to 10 windows would still hold 100 ms
    measured = measurement_from("m", traffic_result(noisy[:stop]), RULES, 8, None, "grpc", judged=sweep_rules)
    p99 = measured.judgement("p99 latency")
    assert (p99.outcome, p99.futile, p99.settled) == (UNDECIDED, True, True)
    assert not CurvePoint.measured(8, measured).within_budget(100.0)
    slo = slo_rules(100.0, 0.999)  # PERF-1 asks the same question without giving up: 10 windows, too close
    assert _stops_after(noisy, slo) == 10


def test_a_curve_point_the_window_budget_can_decide_goes_on_to_decide():
    search = CapacitySearch(max_batch_size=32, instances=2, budget_p99_ms=100, success_min=0.999)
    over = windows_at(p99_ms=110.0, per_window=400, count=10, spread=0.1)
    sweep_rules = search.point_rules([], 8, 0.10)
    stop = _stops_after(over, sweep_rules)
    assert stop == 6  # undecided at the first look, not futile: decided at the second
    measured = measurement_from("m", traffic_result(over[:stop]), RULES, 8, None, "grpc", judged=sweep_rules)
    assert measured.judgement("p99 latency").outcome == FAIL


def test_a_drop_inside_the_noise_ends_the_point_undecided_and_is_no_fall():
    search = CapacitySearch(max_batch_size=32, instances=2, budget_p99_ms=100, success_min=0.999)
    previous = _decided_best(4, 230.0)  # the next point measures about 203 infer/s: below 0.9 x 230
    noisy = windows_at(p99_ms=10.0, per_window=400, count=10, spread=0.1)
    rules = search.point_rules([previous], 8, 0.10)
    stop = _stops_after(noisy, rules)
    patient = [replace(r, stop_when_futile=False) for r in rules]
    assert _stops_after(noisy, patient) > stop  # without giving up it measures on
    measured = measurement_from("m", traffic_result(noisy[:stop]), RULES, 8, None, "grpc", judged=rules)
    fall = measured.judgement("throughput against the previous point")
    assert stop < 10 and fall.outcome == UNDECIDED and fall.futile
    assert not falls(previous, CurvePoint.measured(8, measured), 0.10)


def _stops_after(windows, judged):
    return next(n for n in range(1, len(windows) + 1) if measurement_done(windows[:n], RULES, judged, "m"))



def test_a_plateau_needs_flat_values_and_no_confirmed_gain():
    search = CapacitySearch(max_batch_size=32, instances=2, budget_p99_ms=100, success_min=0.999)  # rule: 128

    def noisy(c, throughput, spread=0.2):
        return CurvePoint(c, throughput, 5.0, 10.0, 1.0, True, throughput_interval=Interval(
            throughput * (1 - spread), throughput * (1 + spread), 0.95), p99_interval=Interval(9.0, 11.0, 0.95))

    flat = [_decided_best(1, 500.0), _decided_best(2, 1000.0), noisy(4, 1500.0), noisy(8, 1520.0), noisy(16, 1540.0)]
    assert search.next_level(flat) is None and search.reason == PLATEAU  # +2.7% over two doublings
    # a busy machine: a five-fold rise that the intervals cannot confirm is no plateau (seen on this
    # machine at load 13: 304 -> 466 -> 1525 infer/s with intervals [0, 789] ... [376, 2675])
    def measured(c, throughput, low, high):
        return replace(noisy(c, throughput), throughput_interval=Interval(low, high, 0.95))

    busy = [measured(1, 304.0, 0.0, 789.3), measured(2, 466.3, 119.5, 813.2), measured(4, 1525.3, 375.8, 2674.9)]
    assert search.next_level(busy) == 8
    rising = [*flat[:4], _decided_best(16, 2400.0)]
    assert search.next_level(rising) == 32


def test_no_point_decidedly_within_the_budget_but_some_by_value_is_too_close_to_call_not_a_failure():
    noisy = {None: (60.0, 400)}  # p99 60 ms against 100 ms on +-60% windows: no interval clears the budget
    check, facts = _check("PERF-2"), Facts()
    undecided = sweep(RecordedLoad(noisy, spread=0.6), check, QuietHealth(), [_profile()], facts,
                      SweepLimits.of(check))
    assert not [f for f in check.errors if "no concurrency keeps p99" in f.message]
    assert len(undecided) == 1 and "too close to call whether some point keeps p99 within 100 ms" in undecided[0]
    assert facts.get(Capacity, "m") is None  # no capacity published for others to plan with
