"""A streaming measurement stops once its rules are decided and goes on while they are not
(load/streaming/looks.py), on recorded per-request samples: the look schedule, each stopping
decision, the run budget's cap, the engine's look loop, and the record a decided or undecided
PERF-1 measurement leaves (no server)."""

from __future__ import annotations

import asyncio
import time

import pytest
from test_streaming_confidence import _check, _slo, recorded_stream

from pytest_triton_ready import budget
from pytest_triton_ready.load.decision import FAIL, PASS, UNDECIDED
from pytest_triton_ready.load.streaming.confidence import stream_slo_rules, streaming_estimate, success_rule, ttft_rule
from pytest_triton_ready.load.streaming.looks import StreamingLooks
from pytest_triton_ready.load.streaming.requests import StreamingPlan
from pytest_triton_ready.load.streaming.stats import RequestRecord, StreamTally
from pytest_triton_ready.load.streaming.traffic import StreamingLoad
from pytest_triton_ready.performance.streaming_target import SINGLE_RESPONSE, TargetMeasurement, record_at_target
from pytest_triton_ready.thresholds import THRESHOLDS, ThresholdValue

LOOKS = StreamingLooks(first_s=6.0, longest_s=20.0, window_s=2.0, confidence=0.95, min_requests=10)


def _threshold(overrides: dict[str, float] | None = None):
    values = {name: spec.default for name, spec in THRESHOLDS.items()} | (overrides or {})
    return lambda name: ThresholdValue(name, values[name], THRESHOLDS[name].unit, "default")


def test_the_looks_come_at_the_configured_length_then_twice_as_long_and_at_the_window_budget():
    assert LOOKS.times_s == (6.0, 12.0, 20.0)
    assert StreamingLooks(3.0, 20.0).times_s == (3.0, 6.0, 12.0, 20.0)


def test_streamed_and_unary_measurements_look_on_one_schedule():
    """One rule (load/stability.look_schedule): the unary schedule in windows of 0.5 s is the
    streamed one in seconds, and each look's level is the same Bonferroni step."""
    from pytest_triton_ready.load.stability import MeasureRules

    unary = MeasureRules(window_s=0.5, max_windows=24, min_duration_s=2.0)
    assert unary.look_windows == (4, 8, 16, 24)
    streamed = StreamingLooks(2.0, 12.0, window_s=0.5)
    assert streamed.times_s == tuple(n * 0.5 for n in unary.look_windows)
    assert streamed.level == pytest.approx(unary.look_level)
    assert StreamingLooks(12.0, 20.0).times_s == (12.0, 20.0)
    assert StreamingLooks(30.0, 30.0).times_s == (30.0,)  # as long as the budget allows: one look
    assert LOOKS.level == pytest.approx(1 - 0.05 / 3)  # Bonferroni over the looks, as the unary engine


def test_the_schedule_comes_from_the_thresholds_and_the_run_budget_caps_its_longest():
    looks = StreamingLooks.from_thresholds(_threshold(), first_s=6.0)
    assert (looks.first_s, looks.longest_s, looks.min_requests) == (6.0, 12.0, 10)  # 24 windows of 0.5 s
    now = [0.0]
    run = budget.RunBudget(30.0, {"PERF-1": 30.0}, clock=lambda: now[0])
    run.enter("PERF-1")
    deadline = run.deadlines["PERF-1"]  # given explicitly (StreamingRun.deadline), not read from a global
    assert StreamingLooks.from_thresholds(_threshold(), 6.0, parts=3, deadline=deadline).longest_s == pytest.approx(10.0)
    now[0] = 28.0
    assert StreamingLooks.from_thresholds(_threshold(), 6.0, parts=1, deadline=deadline).longest_s == 6.0


def test_a_clear_pass_stops_at_the_first_look():
    stats = recorded_stream(duration_s=20.0)  # TTFT about 80 ms, ITL about 5 ms; 700 requests
    rules = [*stream_slo_rules(_slo(1000.0)), success_rule(0.999)]
    assert LOOKS.decided(rules, stats)
    judged = {j.rule.name: j for j in LOOKS.judge(rules, stats)}
    assert {name: j.outcome for name, j in judged.items()} == {
        "TTFT p99": PASS, "ITL p99": PASS, "success rate": UNDECIDED}
    # 700 clean streams show a success rate of about 0.99 at least, not 0.999: no failure, nothing
    # shown, and the judgement says what would show it
    assert judged["success rate"].settled and judged["success rate"].estimate.interval.low < 0.999
    assert judged["success rate"].needs.startswith("0.999 needs >= 3,688 clean requests at 95%")


def test_a_clear_fail_stops_at_the_first_look():
    stats = recorded_stream()
    judged = LOOKS.judge([ttft_rule(40.0)], stats)
    assert judged[0].outcome == FAIL and LOOKS.decided([ttft_rule(40.0)], stats)


def test_a_threshold_inside_the_noise_goes_on():
    stats = recorded_stream(stall_every=7)
    rules = [ttft_rule(stats.ttft_ms["p99"])]
    assert LOOKS.judge(rules, stats)[0].outcome == UNDECIDED
    assert not LOOKS.decided(rules, stats)


def test_a_pass_on_too_few_requests_goes_on():
    stats = recorded_stream(users=1, duration_s=0.4)  # a handful of requests
    assert stats.completed < LOOKS.min_requests
    assert not LOOKS.decided([ttft_rule(1000.0)], stats)


def _failing_stream(failures_every: int = 2):
    tally = StreamTally()
    for n in range(60):
        start = n * 0.1
        rec = RequestRecord(f"r{n}", 0, start, sent=start, first=start + 0.01, last_data=start + 0.05,
                            end=start + 0.06, responses=5, tokens=4, final=True)
        if n % failures_every == 0:
            rec.error = "the model refused the request"
        tally.record(rec)
    return tally.summary()


def test_a_success_rate_decidedly_below_its_minimum_stops_whatever_the_validity():
    stats = _failing_stream()  # half of the requests fail
    assert streaming_estimate("success rate", stats, 0.95, 2.0).value == pytest.approx(0.5)
    looks = StreamingLooks(6.0, 20.0, min_requests=1000)  # never valid
    judged = looks.judge([ttft_rule(1000.0), success_rule(0.999)], stats)
    assert [j.outcome for j in judged] == [UNDECIDED, FAIL]  # 30 answers show no p99; the failures decide
    assert looks.decided([ttft_rule(1000.0), success_rule(0.999)], stats)


def test_a_stuck_request_counts_as_a_failure_in_the_success_rate():
    tally = StreamTally()
    for n in range(20):
        tally.record(RequestRecord(f"r{n}", 0, n * 0.3, sent=n * 0.3, first=n * 0.3 + 0.01, last_data=n * 0.3 + 0.02,
                                   end=n * 0.3 + 0.03, responses=2, tokens=2, final=True))
    tally.record_stuck(RequestRecord("stuck", 0, 1.0, sent=1.0, tokens=1, responses=1), now=3.0)
    assert streaming_estimate("success rate", tally.summary(), 0.95, 2.0).value == pytest.approx(20 / 21)


def test_undecided_at_its_longest_the_check_says_too_close_to_call_with_the_interval():
    stats = recorded_stream(stall_every=7, duration_s=20.0)
    slo = _slo(stats.ttft_ms["p99"])
    rules = [*stream_slo_rules(slo), success_rule(0.999)]
    measured = TargetMeasurement("m", 8, slo, stats, LOOKS, {j.rule.name: j for j in LOOKS.judge(rules, stats)}, None)
    check = _check()
    reasons = record_at_target(check, measured)
    assert len(reasons) == 1 and reasons[0].startswith("m: too close to call: TTFT p99 ")
    assert "95% interval [" in reasons[0]
    assert any("measured to its longest, 20 s (looks at 6, 12, 20 s)" in e.text for e in check.result.evidence)


def test_a_decided_measurement_records_where_it_stopped_and_leaves_no_reason():
    stats = recorded_stream(duration_s=20.0)
    slo = _slo(1000.0)
    rules = [*stream_slo_rules(slo), success_rule(0.999)]
    measured = TargetMeasurement("m", 8, slo, stats, LOOKS, {j.rule.name: j for j in LOOKS.judge(rules, stats)}, 6.0)
    check = _check()
    assert record_at_target(check, measured) == []
    assert not check.errors
    assert any("decided at the look after 6 s" in e.text for e in check.result.evidence)


def test_a_stream_of_one_response_is_judged_on_ttft_and_success_and_its_itl_is_not_applicable():
    """Triton's QA model async_execute_decouple answers each request with one response and the
    final flag: no inter-token latency exists, and "not measured: ITL p99" made a healthy model
    INCOMPLETE."""
    stats = recorded_stream(tokens=1)
    assert stats.single_response and stats.itl_ms["p99"] is None and not recorded_stream().single_response
    slo = _slo(1000.0, tokens_per_s=10.0)
    rules = [*stream_slo_rules(slo), success_rule(0.999)]
    measured = TargetMeasurement("m", 8, slo, stats, LOOKS, {j.rule.name: j for j in LOOKS.judge(rules, stats)}, 6.0)
    check = _check()
    assert record_at_target(check, measured) == [] and not check.errors
    names = {m.name: m for m in check.result.measurements}
    assert "TTFT p99" in names and not names.keys() & {"ITL p99", "ITL p50"}
    assert names["output tokens/s"].threshold is None  # shown, not judged
    assert [e.text for e in check.result.evidence if e.label == "m: ITL and output tokens/s"] == [SINGLE_RESPONSE]
    assert SINGLE_RESPONSE.startswith("not applicable: every stream answered with one response")


def _load_with_looks(stop_when, looks_s=(0.05, 0.1, 0.2)):
    plan = StreamingPlan("m", "PROMPT", "MAX_TOKENS", "TOKEN", [], False)
    load = StreamingLoad("localhost:1", plan, concurrency=1, duration_s=max(looks_s), looks_s=looks_s,
                         stop_when=stop_when)
    load._t0 = time.monotonic()
    return load


def test_the_engine_stops_at_the_first_look_its_rules_are_decided_on():
    answers = iter([False, True])
    seen = []

    def stop_when(stats):
        seen.append(stats)
        return next(answers)

    load = _load_with_looks(stop_when)
    asyncio.run(load._watch_stop(load._t0 + 0.2))
    assert load.decided_at_s == 0.1 and len(seen) == 2


def test_the_engine_runs_to_its_longest_while_undecided_and_does_not_ask_at_the_last_look():
    seen = []
    load = _load_with_looks(lambda stats: seen.append(stats) or False)
    started = time.monotonic()
    asyncio.run(load._watch_stop(load._t0 + 0.2))
    assert load.decided_at_s is None and len(seen) == 2  # the last look is the end itself
    assert time.monotonic() - started >= 0.19


def test_the_streaming_curve_charts_draw_each_points_interval():
    from pytest_triton_ready.performance.streaming_curve import concurrencies, stream_curve_charts
    from pytest_triton_ready.performance.streaming_rules import StreamingPoint

    assert concurrencies(16) == [1, 2, 4, 8, 16] and concurrencies(1) == [1]
    points = [StreamingPoint.measured(c, recorded_stream(users=c, seed=c, duration_s=600.0 / c), success_min=0.999,
                                  min_requests=10, level=LOOKS.level, window_s=2.0, shown_level=0.95) for c in (1, 2, 4)]
    charts = stream_curve_charts(points, 1000.0)
    assert list(charts["tokens"]) == ["tokens/s", "tokens/s 95% interval low", "tokens/s 95% interval high"]
    assert list(charts["ttft"]) == ["TTFT p99", "TTFT p99 95% interval low", "TTFT p99 95% interval high", "SLO"]
    ttft = charts["ttft"]
    for (c, value), (_, low), (_, high) in zip(ttft["TTFT p99"], ttft["TTFT p99 95% interval low"],
                                               ttft["TTFT p99 95% interval high"], strict=True):
        assert low <= value <= high, c
    lows = dict(charts["tokens"]["tokens/s 95% interval low"])
    assert all(lows[p.concurrency] <= p.tokens_per_s for p in points)


def test_a_point_without_an_interval_is_drawn_without_one():
    from pytest_triton_ready.performance.streaming_curve import stream_curve_charts
    from pytest_triton_ready.performance.streaming_rules import StreamingPoint

    charts = stream_curve_charts([StreamingPoint(1, 100.0, 50.0)], 1000.0)
    assert list(charts["tokens"]) == ["tokens/s"] and list(charts["ttft"]) == ["TTFT p99", "SLO"]


def test_a_measurement_decided_at_a_look_reports_the_stats_it_was_decided_on_unless_a_failure_came_after():
    from pytest_triton_ready.load.streaming.stats import StuckRequest
    from pytest_triton_ready.load.streaming.traffic import measured_stats

    decided = recorded_stream(duration_s=2.0)
    final = recorded_stream(duration_s=2.6)  # the requests in flight at the look ended afterwards
    assert measured_stats(final, None) is final  # ran its length
    assert measured_stats(final, decided) is decided
    final.stuck.append(StuckRequest("u0-r9", 0, 3, 3, 10.0))
    assert measured_stats(final, decided) is final  # a stuck request is never left out
    failed = recorded_stream(duration_s=2.6)
    failed.errors["the stream closed"] = 1
    assert measured_stats(failed, decided) is failed
