"""Rules decided with confidence, on recorded windows (no server): intervals, too close to call,
early decisions, success before validity, and the curve's falls judged against the noise."""

from __future__ import annotations

from dataclasses import replace

import pytest
from default_settings import default_settings
from recorded_windows import recorded_windows, traffic_result

from pytest_triton_ready.load.confidence import (
    Interval,
    batch_means,
    estimate,
    order_statistic_interval,
    proportion_interval,
    t_quantile,
    trials_needed,
)
from pytest_triton_ready.load.decision import (
    FAIL,
    PASS,
    UNDECIDED,
    Rule,
    decided_enough,
    judge_measurement,
    judge_windows,
    relative_rule,
)
from pytest_triton_ready.load.engine import measurement_done, measurement_from
from pytest_triton_ready.load.judged import record_judgement
from pytest_triton_ready.load.stability import MeasureRules, stability
from pytest_triton_ready.load.stats import LatencyHistogram
from pytest_triton_ready.load.traffic import Window
from pytest_triton_ready.performance.curve import CurvePoint, capacity, drops_inside_noise, falls, shape_problems
from pytest_triton_ready.record.model import Result
from pytest_triton_ready.record.recorder import CheckRecorder

P99_RULE = Rule("p99 latency", "p99", "<=", 100.0, "ms")
SUCCESS_RULE = Rule("success rate", "success rate", ">=", 0.999, "ratio", needs_validity=False)
# The rules the recorded windows below are cut for: 2 s windows, valid from 6 s and 200 requests,
# at most 10 windows, 95%.
RULES = MeasureRules(window_s=2.0, min_duration_s=6.0, max_windows=10)


def stopping_point(windows: list[Window], judged: list[Rule], rules: MeasureRules = RULES) -> int:
    """How many windows the engine measures before it stops, fed one recorded window at a time."""
    for n in range(1, len(windows) + 1):
        if measurement_done(windows[:n], rules, judged, "m"):
            return n
    return len(windows)


def _check() -> CheckRecorder:
    return CheckRecorder(Result("PERF-1", "performance", "t", "checks/test_performance.py::t"), default_settings())


# -- intervals ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("level", "df", "expected"), [(0.95, 1, 12.706), (0.95, 2, 4.303), (0.95, 9, 2.262),
                                                       (0.99, 4, 4.604), (0.90, 30, 1.697)])
def test_student_t_quantiles_match_the_table(level, df, expected):
    assert t_quantile(level, df) == pytest.approx(expected, abs=1e-3)


def test_batch_means_need_two_windows_and_centre_on_their_mean():
    assert batch_means([5.0], 0.95) is None
    interval = batch_means([9.0, 10.0, 11.0], 0.95)
    assert interval.low < 10.0 < interval.high
    assert interval.high - 10.0 == pytest.approx(4.303 * 1.0 / 3 ** 0.5, rel=1e-3)
    assert batch_means([1.0, 1.0, 1.0], 0.95) == Interval(1.0, 1.0, 0.95)


def test_the_order_statistic_interval_brackets_the_percentile_and_narrows_with_more_samples():
    small, large = LatencyHistogram(), LatencyHistogram()
    for i in range(1, 1001):
        small.record_s(i / 1e5)  # 0.01 .. 10 ms, uniform
    for i in range(1, 100_001):
        large.record_s(i / 1e7)
    narrow, wide = order_statistic_interval(large, 99.0, 0.95), order_statistic_interval(small, 99.0, 0.95)
    assert wide.low <= 9.9 <= wide.high and narrow.low <= 9.9 <= narrow.high
    assert narrow.high - narrow.low < (wide.high - wide.low) / 5


# -- rules decided with confidence -----------------------------------------------------------------
def test_a_measurement_looks_at_its_rules_a_few_times_each_at_a_level_that_keeps_the_whole():
    assert RULES.look_windows == (3, 6, 10)
    assert RULES.look_level == pytest.approx(1 - 0.05 / 3)
    assert MeasureRules().look_windows == (4, 8, 16, 24)  # the defaults: 0.5 s windows, valid from 2 s, 12 s at most
    short = MeasureRules(window_s=0.4, min_duration_s=1.2, max_windows=6)
    assert short.look_windows == (3, 6)
    assert MeasureRules(max_windows=1).look_windows == (1,)


def test_a_threshold_inside_the_noise_ends_too_close_to_call_with_its_interval():
    windows = recorded_windows(p99_ms=100.0, count=10, spread=0.05)
    assert stopping_point(windows, [P99_RULE]) == 10  # measured to the window budget, undecided
    (p99,) = judge_measurement([P99_RULE], windows, RULES, "m")
    assert p99.outcome == UNDECIDED
    assert p99.estimate.interval.low < 100.0 < p99.estimate.interval.high
    check = _check()
    reason = record_judgement(check, p99, model="m")
    assert reason.startswith("m: too close to call: p99 latency 101.2 ms, 95% interval [")
    assert "95% interval [" in reason and "ms, rule <= 100 ms" in reason
    assert not check.errors  # neither passed nor failed on the point value
    assert check.result.measurements[-1].threshold is None


def test_a_clear_pass_decides_on_the_first_valid_windows():
    windows = recorded_windows(p99_ms=4.0, count=10, per_window=1600, spread=0.3)  # mean latency spread 13.7%: unstable
    assert stopping_point(windows, [P99_RULE, SUCCESS_RULE]) == 3  # 6 s: the validity minimum, 4,800 clean requests
    measured = measurement_from("m", traffic_result(windows[:3]), RULES, 4, None, "grpc", judged=[P99_RULE, SUCCESS_RULE])
    assert not measured.stable and measured.trustworthy and measured.problem() is None
    assert [j.outcome for j in measured.judgements] == [PASS, PASS]
    assert measured.judgement("p99 latency").margin == pytest.approx(96.0, abs=0.5)
    assert measured.stats.count_ok == 4800  # every window reported, not the last three only by chance


def test_a_clear_fail_decides_early_too():
    windows = recorded_windows(p99_ms=150.0, count=10, spread=0.05)
    assert stopping_point(windows, [P99_RULE]) == 3
    check = _check()
    (p99,) = judge_measurement([P99_RULE], windows[:3], RULES, "m")
    assert p99.outcome == FAIL
    assert record_judgement(check, p99, model="m", finding="m: p99 over budget") is None
    assert [f.message for f in check.errors] == ["m: p99 over budget"]
    assert [e.text for e in check.result.evidence] == [
        "p99 latency 145.7 ms, 95% interval [137.3, 153.2] ms, rule <= 100 ms: fail (margin -45.66 ms)"]


def test_a_budget_far_below_every_request_fails_however_noisy_the_windows():
    """Windows whose p99 swings from 3 to 57 ms against a 0.05 ms budget: a symmetric interval of
    the windows' p99 reached below zero and called it too close; the percentile interval is taken
    on the logarithms, so it stays above zero and the rule fails at the first look."""
    windows = recorded_windows(p99_ms=30.0, count=10, spread=0.9, seed=5)
    tiny = Rule("p99 latency", "p99", "<=", 0.05, "ms")
    assert stopping_point(windows, [tiny]) == 3
    (p99,) = judge_measurement([tiny], windows[:3], RULES, "m")
    assert p99.outcome == FAIL and p99.estimate.interval.low > 0.05


def test_without_rules_the_engine_keeps_perf_analyzers_stop():
    steady = recorded_windows(p99_ms=4.0, count=10, spread=0.0)
    noisy = recorded_windows(p99_ms=4.0, count=10, spread=0.3)
    assert stopping_point(steady, None) == 3
    stop = stopping_point(noisy, None)
    assert stop > 3 and stability(noisy[:stop], RULES)[0]


# -- success before validity ----------------------------------------------------------------------
def test_a_model_failing_every_request_fails_on_its_success_rate_whatever_the_validity():
    windows = recorded_windows(p99_ms=4.0, count=10, per_window=0, errors=400)
    assert stopping_point(windows, [P99_RULE, SUCCESS_RULE]) == 3  # the first look, never valid
    measured = measurement_from("m", traffic_result(windows[:3]), RULES, 4, None, "grpc", judged=[P99_RULE, SUCCESS_RULE])
    assert not measured.valid  # 0 requests < 200
    success = measured.judgement("success rate")
    assert (success.outcome, success.value) == (FAIL, 0.0)
    check = _check()
    record_judgement(check, success, model="m", threshold=0.999, finding="m: success rate 0.00% is below 0.999")
    assert [f.message for f in check.errors] == ["m: success rate 0.00% is below 0.999"]
    assert decided_enough(measured.judgements, valid=False)


def test_a_few_errors_keep_the_success_rate_open_until_it_is_decided():
    clean = recorded_windows(p99_ms=4.0, count=10, per_window=1600)
    some = recorded_windows(p99_ms=4.0, count=10, errors=1, seed=3)
    many = recorded_windows(p99_ms=4.0, count=10, errors=60, seed=3)
    assert judge_measurement([SUCCESS_RULE], clean[:3], RULES, "m")[0].outcome == PASS  # 4,800 clean requests
    assert judge_measurement([SUCCESS_RULE], many[:3], RULES, "m")[0].outcome == FAIL
    # 10 failures in 6,010 requests: 99.83%, but the exact interval [0.9969, 0.9992] holds 0.999
    assert judge_measurement([SUCCESS_RULE], some, RULES, "m")[0].outcome == UNDECIDED
    (ten,) = judge_windows([SUCCESS_RULE], some, 0.95, "m")
    assert ten.outcome == UNDECIDED and ten.estimate.interval.contains(0.999)
    assert (round(ten.estimate.interval.low, 4), round(ten.estimate.interval.high, 4)) == (0.9969, 0.9992)


def test_windows_that_all_read_one_decide_no_success_rate_on_a_few_hundred_requests():
    """0 failures in 200 requests show a rate >= 0.9817 at 95%, not >= 0.999: batch means of
    windows that all read 1.0 gave the interval [1, 1] and passed."""
    windows = recorded_windows(p99_ms=4.0, count=2, per_window=100)
    (success,) = judge_windows([SUCCESS_RULE], windows, 0.95, "m")
    assert success.outcome == UNDECIDED and success.value == 1.0
    assert success.estimate.interval.low == pytest.approx(0.9817, abs=1e-4)
    assert success.needed == trials_needed(0.999, 0.95) == 3688
    assert success.describe().endswith("rule >= 0.999 ratio; 0.999 needs >= 3,688 clean requests at 95%, 200 measured")
    assert success.to_dict()["trials_needed"] == 3688
    looked = judge_measurement([SUCCESS_RULE], windows, RULES, "m")[0]  # one look of three: its level is 98.3%
    assert looked.needs == "0.999 needs >= 3,688 clean requests at 95% (4,786 at this look's 98.3%), 200 measured"


@pytest.mark.parametrize(("successes", "trials", "low", "high"), [
    (200, 200, 0.981725, 1.0), (0, 50, 0.0, 0.071121), (6000, 6010, 0.996942, 0.999202)])
def test_proportion_intervals_are_clopper_pearson(successes, trials, low, high):
    interval = proportion_interval(successes, trials, 0.95)
    assert (interval.low, interval.high) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))
    assert proportion_interval(0, 0, 0.95) is None


def test_trials_needed_is_the_first_count_whose_clean_interval_clears_the_minimum():
    n = trials_needed(0.999, 0.95)
    assert proportion_interval(n, n, 0.95).low >= 0.999 > proportion_interval(n - 1, n - 1, 0.95).low
    assert trials_needed(1.0, 0.95) is None and trials_needed(0.0, 0.95) == 0


# -- the curve: falls judged against the noise ----------------------------------------------------
def _point(concurrency, throughput, half_width, p99=5.0, p99_interval=None):
    return CurvePoint(concurrency, throughput, 1.0, p99, 1.0, True,
                      throughput_interval=Interval(throughput - half_width, throughput + half_width, 0.95),
                      p99_interval=p99_interval)


def test_a_throughput_drop_inside_the_intervals_is_not_a_fall_before_the_knee():
    """The false failure of a busy machine: 3805 -> 3269 infer/s from concurrency 2 to 4."""
    points = [_point(1, 2000, 150), _point(2, 3805, 400), _point(4, 3269, 380), _point(8, 3900, 300)]
    knee = points[-1]
    assert not falls(points[1], points[2], 0.10)
    assert shape_problems(points, knee, 0.10, 100.0, None) == []
    (note,) = drops_inside_noise(points, 0.10)
    assert "3805 -> 3269" in note and "inside the noise" in note


def test_a_throughput_drop_beyond_the_intervals_is_still_a_fall():
    points = [_point(1, 2000, 50), _point(2, 3805, 40), _point(4, 3269, 40), _point(8, 3900, 40)]
    assert falls(points[1], points[2], 0.10)
    (problem,) = shape_problems(points, points[-1], 0.10, 100.0, None)
    assert "falls from 3805 to 3269" in problem


def test_a_point_whose_p99_interval_reaches_past_the_budget_is_not_the_capacity():
    inside = _point(2, 3000, 50, p99=40.0, p99_interval=Interval(35.0, 45.0, 0.95))
    close = _point(4, 3500, 50, p99=98.0, p99_interval=Interval(94.0, 103.0, 0.95))
    assert capacity([inside, close], 50.0, 0.999) is inside
    assert capacity([inside, close], 100.0, 0.999) is inside  # too close to call is not within SLO


def test_a_curve_point_decides_its_fall_question_against_the_previous_point_and_its_noise():
    previous = recorded_windows(p99_ms=4.0, count=3, seed=1)
    same = recorded_windows(p99_ms=4.0, count=10, seed=2)
    reference = estimate("throughput", previous, 0.95, "m")
    fall = relative_rule("throughput against the previous point", "throughput", ">=", reference, 0.9,
                         "infer/s", failure_only=True)
    assert stopping_point(same, [fall]) == 3  # no fall by the value: nothing to confirm
    halved = [Window(w.index, w.start_s, w.start_s + 4.0, w.stats, w.by_model, tallies=w.tallies) for w in same]
    halved = [Window(w.index, w.start_s, w.end_s, _rescaled(w, 0.5), {"m": _rescaled(w, 0.5)}, tallies=w.tallies)
              for w in same]
    (judged,) = judge_measurement([fall], halved[:3], RULES, "m")
    assert judged.outcome == FAIL


def _rescaled(window, factor):
    stats = window.stats
    return type(stats)(**{**stats.__dict__, "throughput_infer_s": stats.throughput_infer_s * factor,
                          "count_ok": int(stats.count_ok * factor)})



def test_a_curve_point_asks_the_searchs_questions():
    from pytest_triton_ready.performance.curve import CapacitySearch

    search = CapacitySearch(max_batch_size=2, instances=1, budget_p99_ms=100.0, success_min=0.999)  # rule: 4
    first = search.point_rules([], 1, 0.10)
    assert [r.name for r in first] == ["p99 latency", "success rate"]
    assert not first[1].needs_validity and first[0].needs_validity
    points = [_point(1, 1000, 50), _point(2, 1800, 60), _point(4, 2000, 60)]
    within = search.point_rules(points, 4, 0.10)
    assert [r.name for r in within] == ["p99 latency", "success rate", "throughput against the previous point"]
    assert within[2].failure_only and within[2].threshold == pytest.approx(0.9 * 1800)
    assert [r.name for r in search.point_rules(points, 8, 0.10)] == [r.name for r in within]


def test_past_the_rule_of_thumb_the_search_doubles_only_while_a_gain_is_confirmed():
    from pytest_triton_ready.performance.curve import PLATEAU, CapacitySearch

    def search_after(points):
        search = CapacitySearch(max_batch_size=2, instances=1, budget_p99_ms=100.0, success_min=0.999)
        return search.next_level(points), search.reason

    base = [_point(1, 1000, 20), _point(2, 1800, 20), _point(4, 2000, 20)]
    assert search_after([*base, _point(8, 2400, 20)]) == (16, None)  # +20%, intervals +-1%
    assert search_after([*base, _point(8, 2400, 500)]) == (None, PLATEAU)  # +20% inside +-25% noise


def test_a_p99_of_too_few_requests_is_undecided_and_futile_only_where_the_budget_holds_too_few():
    """150 requests bound no p99 from above (the order statistic it needs lies beyond the
    largest): undecided whatever the budget, and the measurement goes on while its window budget
    can reach the 477 requests a look at 98.3% needs."""
    rule = replace(P99_RULE, threshold=1000.0, stop_when_futile=True)
    sparse = recorded_windows(p99_ms=4.0, count=10, per_window=50)
    (p99,) = judge_measurement([rule], sparse[:3], RULES, "m")
    assert p99.outcome == UNDECIDED and p99.estimate.interval.high == float("inf") and not p99.futile
    assert p99.needs == "p99 latency needs >= 368 requests at 95% (477 at this look's 98.3%), 150 measured"
    assert judge_measurement([rule], sparse, RULES, "m")[0].outcome == PASS  # 500 requests
    starved = recorded_windows(p99_ms=4.0, count=10, per_window=10)
    assert judge_measurement([rule], starved[:3], RULES, "m")[0].futile  # 10 windows hold 100 < 477


def test_two_batches_do_not_widen_a_percentile_interval_by_students_t_at_one_degree_of_freedom():
    """At a curve point's share of the error budget, t at 1 degree of freedom is in the thousands:
    two windows' p99s turned a 1.3 ms p99 into [1e-24, 1e24] ms."""
    from pytest_triton_ready.load.confidence import MIN_BATCHES, percentile_interval

    windows = recorded_windows(p99_ms=4.0, count=2, per_window=1500, spread=0.3, seed=4)
    merged = LatencyHistogram()
    for w in windows:
        merged.add(w.tallies["m"].histogram)
    level = 1 - 0.05 / 36
    interval = percentile_interval(merged, [w.tallies["m"].histogram for w in windows], 99.0, level)
    assert MIN_BATCHES == 3 and interval == order_statistic_interval(merged, 99.0, level)
    assert interval.high < 10.0
