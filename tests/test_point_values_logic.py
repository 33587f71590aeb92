"""No rule passes on a point value (no server): a curve point without an interval is undecided, not
within the p99 budget, and the capacity is chosen among decided points only; a streaming point
without an interval is not within the TTFT SLO, and the capacity's rule is recorded on its
interval's judgement; streaming PERF-1's success rate is recorded on its interval; a rule against
a reference that was not measured is undecided, never '>= 0'."""

from __future__ import annotations

from dataclasses import replace

from test_streaming_confidence import _check, _slo, recorded_stream
from test_streaming_looks import LOOKS

from pytest_triton_ready.load.confidence import Estimate, Interval
from pytest_triton_ready.load.decision import FAIL, PASS, UNDECIDED, judge, relative_rule
from pytest_triton_ready.load.profile import ModelProfile
from pytest_triton_ready.load.streaming.confidence import stream_slo_rules, success_rule
from pytest_triton_ready.performance.curve import CapacitySearch, CurvePoint, capacity, undecided_within
from pytest_triton_ready.performance.streaming_curve import SweptPoint, record_stream_capacity, record_stream_curve
from pytest_triton_ready.performance.streaming_rules import StreamingPoint
from pytest_triton_ready.performance.streaming_rules import judge_stream_curve as judge_streaming_curve
from pytest_triton_ready.performance.streaming_target import TargetMeasurement, record_at_target
from pytest_triton_ready.performance.sweep import Curve, SweepLimits, judge_curve

LIMITS = SweepLimits(success_min=0.999, cap=0, search_max_concurrency=64, min_gain=0.05, knee_fraction=0.9,
                     drop_tolerance=0.1)
PROFILE = ModelProfile("m", 8, 1, None, False, 50.0, "slo", 50.0, None)


def _decided(concurrency: int, throughput: float, p99: float) -> CurvePoint:
    return CurvePoint(concurrency, throughput, p99 / 2, p99, 1.0, True, p99_interval=Interval(0.9 * p99, 1.1 * p99, 0.95))


def _no_interval(concurrency: int, throughput: float, p99: float) -> CurvePoint:
    return CurvePoint(concurrency, throughput, p99 / 2, p99, 1.0, True)


def _curve(points: list[CurvePoint]) -> Curve:
    return Curve(CapacitySearch(8, 1, PROFILE.budget_p99_ms, LIMITS.success_min), points)


# -- PERF-2: a curve point without an interval ------------------------------------------------------
def test_a_curve_point_without_an_interval_is_undecided_and_the_capacity_comes_from_decided_points():
    decided, bare = _decided(1, 1000.0, 20.0), _no_interval(2, 1800.0, 30.0)
    assert not bare.within_budget(50.0)  # within by value only: main counted it within the budget
    assert capacity([decided, bare], 50.0, 0.999) is decided
    assert undecided_within([decided, bare], 50.0, 0.999) == [bare]
    check = _check()
    assert judge_curve(check, PROFILE, _curve([decided, bare]), LIMITS) is None
    notes = [f.message for f in check.result.findings if "undecided, so left out" in f.message]
    assert notes == ["m: the capacity is chosen among the points decidedly within 50 ms; undecided, so left out: "
                     "concurrency 2: p99 30 ms, no interval"]


def test_a_curve_whose_only_point_within_the_budget_has_no_interval_is_too_close_to_call():
    check = _check()
    reason = judge_curve(check, PROFILE, _curve([_no_interval(1, 1000.0, 20.0), _decided(2, 1100.0, 80.0)]), LIMITS)
    assert reason == ("m: too close to call whether some point keeps p99 within 50 ms: none decidedly does "
                      "(concurrency 1: p99 20 ms, no interval)")
    assert not check.errors


# -- PERF-2 streaming: the TTFT SLO on the interval ----------------------------------------------------
def _swept(point: StreamingPoint) -> SweptPoint:
    return SweptPoint(point, recorded_stream(users=max(1, point.concurrency), duration_s=2.0, seed=point.concurrency),
                      None)


def test_a_streaming_point_without_an_interval_is_not_within_the_ttft_slo():
    bare = StreamingPoint(1, 100.0, 50.0)  # 50 ms against 1000 ms, by value only
    verdict = judge_streaming_curve([bare], 1000.0)
    assert verdict.best_within is None and [(c, j.outcome) for c, j in verdict.too_close] == [(1, UNDECIDED)]
    check = _check()
    capacity_fact, undecided = record_stream_capacity(check, "m", [_swept(bare)], record_stream_curve(check, "m", [_swept(bare)],
                                                                                            1000.0), 1000.0, 1)
    assert undecided.startswith(f"m: {UNDECIDED}: no concurrency decided within the TTFT SLO; at 1 streams TTFT p99 50")
    assert capacity_fact.concurrency is None
    assert not [j for j in check.result.judgements if j.rule == "capacity-within-ttft-slo"]


def test_the_streaming_capacity_rule_is_recorded_on_the_judgement_of_its_interval():
    point = StreamingPoint(1, 100.0, 50.0, ttft=Estimate("ttft p99", 50.0, Interval(45.0, 60.0, 0.95), 4))
    check = _check()
    verdict = record_stream_curve(check, "m", [_swept(point)], 1000.0)
    assert verdict.best_ttft.outcome == PASS
    _, undecided = record_stream_capacity(check, "m", [_swept(point)], verdict, 1000.0, 1)
    [judged] = [j for j in check.result.judgements if j.rule == "capacity-within-ttft-slo"]
    assert undecided is None and judged.passed
    assert "at 1 streams TTFT p99 50 ms, 95% interval [45, 60] ms, rule <= 1000 ms" in judged.measured


# -- PERF-1 streaming: the success rate on its interval --------------------------------------------------
def _target(success: Estimate) -> TargetMeasurement:
    stats = recorded_stream(duration_s=20.0)  # 700 requests: TTFT and ITL p99 bounded
    slo = _slo(1000.0)
    rules = [*stream_slo_rules(slo), success_rule(0.999)]
    judged = {j.rule.name: j for j in LOOKS.judge(rules, stats)}
    judged["success rate"] = judge(success_rule(0.999), success)
    return TargetMeasurement("m", 8, slo, stats, LOOKS, judged, 6.0)


def test_streaming_perf1s_success_rate_within_the_minimum_by_value_only_is_never_a_pass():
    """A stream's success rule only has to show no decided failure (showing 0.999 takes 3,688 clean
    streams): within by value only, it is recorded without a threshold, neither passed nor a reason."""
    check = _check()
    reasons = record_at_target(check, _target(Estimate("success rate", 0.9995, Interval(0.998, 1.0, 0.95), 10,
                                                       trials=2000)))
    assert reasons == []
    [recorded] = [m for m in check.result.measurements if m.name == "success rate"]
    assert recorded.threshold is None and recorded.passed is None  # main compared 0.9995 >= 0.999: a pass
    assert [e.text for e in check.result.evidence if e.label == "m: success rate: not shown"] == [
        "no decided failure; 0.999 needs >= 3,688 clean requests at 95%, 2,000 measured"]
    assert not check.errors


def test_streaming_perf1s_success_rate_decided_on_its_interval_passes_or_fails_there():
    passing = _check()
    assert record_at_target(passing, _target(Estimate("success rate", 1.0, Interval(0.9992, 1.0, 0.95), 10))) == []
    assert [m.passed for m in passing.result.measurements if m.name == "success rate"] == [True]
    failing = _check()
    judged = judge(success_rule(0.999), Estimate("success rate", 0.9991, Interval(0.9985, 0.9989, 0.95), 10))
    assert judged.outcome == FAIL
    assert record_at_target(failing, _target(judged.estimate)) == []
    assert failing.errors  # decidedly below the minimum, though the value 0.9991 is above it


# -- a reference that was not measured -----------------------------------------------------------------
def test_a_rule_against_a_reference_that_was_not_measured_is_undecided_not_at_least_zero():
    rule = relative_rule("throughput above the capacity so far", "throughput", ">=",
                         Estimate("throughput", None, None, 0), 1.05, "infer/s")
    judged = judge(rule, Estimate("throughput", 500.0, Interval(490.0, 510.0, 0.95), 4))
    assert judged.outcome == UNDECIDED and not judged.decided  # main: 490 >= 0, a pass
    assert "rule >= 1.05 x throughput (not measured: reference throughput)" in judged.describe()
    measured = relative_rule("r", "throughput", ">=", Estimate("throughput", 400.0, Interval(395.0, 405.0, 0.95), 4), 1.05)
    assert judge(measured, Estimate("throughput", 500.0, Interval(490.0, 510.0, 0.95), 4)).outcome == PASS


def test_a_streaming_curves_points_share_its_error_budget():
    shared = replace(LOOKS, shares=4)
    assert shared.level == 1 - (1 - LOOKS.confidence) / (len(LOOKS.times_s) * 4) > LOOKS.level  # wider intervals
