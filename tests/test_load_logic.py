"""Unit tests of the load engine's pure logic, no server: the sweep and its stop rule, the knee,
the capacity within SLO, the shape problems, CFG-2's batching advice, the reported stats of a
measurement (requests and time from the same windows), HdrHistogram tallies, stability and
validity, the timeline's bins, and the shared model helpers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_triton_ready.config.batching import batching_advice, far_from_preferred, small_batches
from pytest_triton_ready.load.confidence import Interval
from pytest_triton_ready.load.engine import reported_stats
from pytest_triton_ready.load.profile import ModelProfile
from pytest_triton_ready.load.stability import MeasureRules, stability, validity
from pytest_triton_ready.load.stats import RELATIVE_PRECISION, Tally, merged, percentile_key
from pytest_triton_ready.load.timeline import Timeline
from pytest_triton_ready.load.traffic import Window
from pytest_triton_ready.performance.curve import (
    BOUND,
    ERRORS,
    OVER_BUDGET,
    PLATEAU,
    CapacitySearch,
    CurvePoint,
    capacity,
    enough_trusted,
    knee,
    past_saturation,
    shape_problems,
    sweep_levels,
)
from pytest_triton_ready.server.models import instance_count, ready_models, ready_names


def point(concurrency, throughput, p99=10.0, trustworthy=True, success=1.0, p50=None):
    """A measured point: its p99 interval reaches from 90% of the value up to the value."""
    return CurvePoint(concurrency, throughput, p50 if p50 is not None else p99 / 2, p99, success, trustworthy,
                      p99_interval=_p99_interval(p99))


def _p99_interval(p99):
    return Interval(0.9 * p99, p99, 0.95) if p99 is not None else None


# -- the sweep ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("max_batch", "instances", "cap", "levels"), [
    (8, 1, 0, [1, 2, 4, 8, 16]),          # 2 x 8 x 1
    (8, 2, 0, [1, 2, 4, 8, 16, 32]),      # 2 x 8 x 2
    (4, 3, 0, [1, 2, 4, 8, 16, 24]),      # 24 is not a power of two: it ends the sweep
    (8, 2, 10, [1, 2, 4, 8, 10]),         # the cap wins when lower
    (0, 1, 0, [1, 2, 4, 8]),              # no batching: at least 8
    (0, 6, 0, [1, 2, 4, 8, 12]),          # no batching: 2 x instances
    (1, 1, 0, [1, 2]),
])
def test_sweep_levels_double_up_to_the_saturation_rule(max_batch, instances, cap, levels):
    assert sweep_levels(max_batch, instances, cap) == levels


def test_sweep_stops_after_two_flat_points_over_budget():
    budget = 20.0
    rising = [point(1, 100, 5), point(2, 190, 25), point(4, 300, 30)]
    assert not past_saturation(rising, budget)  # still gaining more than 5%
    flat_over = [point(1, 100, 5), point(2, 103, 25), point(4, 104, 30)]
    assert past_saturation(flat_over, budget)
    flat_one_within = [point(1, 100, 25), point(2, 103, 15), point(4, 104, 30)]
    assert not past_saturation(flat_one_within, budget)  # the middle point is within budget
    assert not past_saturation(flat_over[:2], budget)  # three trustworthy points are needed


def test_sweep_stop_ignores_untrustworthy_points():
    points = [point(1, 100, 30), point(2, 500, 5, trustworthy=False), point(4, 101, 30), point(8, 102, 31)]
    assert past_saturation(points, 20.0)  # the last three trustworthy: 100, 101, 102, all over budget
    gaining = [point(1, 100, 30), point(2, 101, 30), point(4, 200, 31, trustworthy=False)]
    assert not past_saturation(gaining, 20.0)  # only two trustworthy points


def test_sweep_stop_gain_is_exactly_five_percent():
    exactly = [point(1, 100, 30), point(2, 105, 30), point(4, 110.25, 30)]
    assert not past_saturation(exactly, 20.0)  # a 5% gain is still a gain
    below = [point(1, 100, 30), point(2, 104.9, 30), point(4, 110.0, 30)]
    assert past_saturation(below, 20.0)


@pytest.mark.parametrize(("trusted", "total", "enough"), [
    (2, 2, True), (1, 2, False), (2, 4, True), (2, 5, False), (3, 5, True), (1, 1, False), (0, 0, False),
])
def test_a_curve_needs_half_its_points_and_two_trustworthy(trusted, total, enough):
    points = [point(2 ** i, 100 + i, trustworthy=i < trusted) for i in range(total)]
    assert enough_trusted(points) is enough


# -- knee, capacity, shape ---------------------------------------------------------------------------
def test_knee_is_the_lowest_concurrency_reaching_the_fraction_of_the_best():
    points = [point(1, 100), point(2, 190), point(4, 380), point(8, 420), point(16, 430)]
    assert knee(points, 0.9).concurrency == 8  # 0.9 x 430 = 387: 380 misses, 420 reaches it
    assert knee(points, 0.85).concurrency == 4  # 365.5
    assert knee(points, 1.0).concurrency == 16


def test_knee_skips_untrustworthy_points_and_is_none_without_any():
    points = [point(1, 100), point(2, 1000, trustworthy=False), point(4, 300)]
    assert knee(points, 0.9).concurrency == 4
    assert knee([point(1, 100, trustworthy=False)], 0.9) is None
    assert knee([], 0.9) is None


def test_capacity_is_the_highest_trustworthy_throughput_within_budget_and_success():
    points = [point(1, 100, 5), point(2, 200, 9.9), point(4, 260, 10.0), point(8, 300, 10.1),
              point(16, 280, 4, trustworthy=False), point(32, 290, 6, success=0.99)]
    best = capacity(points, budget_p99_ms=10.0, success_min=0.999)
    assert (best.concurrency, best.throughput_infer_s) == (4, 260)  # 10.0 ms is within a 10 ms budget
    assert capacity(points, budget_p99_ms=4.0, success_min=0.999) is None
    no_p99 = [CurvePoint(1, 100, None, None, 1.0, True)]
    assert capacity(no_p99, 10.0, 0.999) is None


def test_throughput_falling_before_the_knee_is_a_shape_problem():
    points = [point(1, 100), point(2, 200), point(4, 170), point(8, 400), point(16, 410)]
    knee_point = knee(points, 0.9)
    assert knee_point.concurrency == 8
    problems = shape_problems(points, knee_point, drop_tolerance=0.1, budget_p99_ms=50, target_throughput=None)
    assert problems == ["throughput falls from 200 to 170 infer/s as concurrency rises from 2 to 4, before the "
                        "knee (concurrency 8)"]
    assert shape_problems(points, knee_point, drop_tolerance=0.2, budget_p99_ms=50, target_throughput=None) == []


def test_a_drop_after_the_knee_is_not_a_shape_problem():
    points = [point(1, 100), point(2, 400), point(4, 300)]
    assert shape_problems(points, knee(points, 0.9), 0.05, 50, None) == []


def test_latency_exploding_below_the_target_load_is_named_once():
    points = [point(1, 100, 5), point(2, 150, 80), point(4, 180, 120), point(8, 600, 30)]
    problems = shape_problems(points, knee(points, 0.9), 0.1, budget_p99_ms=50, target_throughput=500)
    assert problems == ["p99 80.0 ms exceeds the 50 ms budget at concurrency 2, where throughput (150 infer/s) is "
                        "still below the target load (500 infer/s): latency explodes before the target is reached"]
    assert shape_problems(points, knee(points, 0.9), 0.1, budget_p99_ms=50, target_throughput=140) == []


# -- CFG-2's batching advice -------------------------------------------------------------------------
def profile_of(max_batch_size=8, instances=1, delay_us=100, preferred=None):
    batching = {"max_queue_delay_microseconds": delay_us}
    if preferred:
        batching["preferred_batch_size"] = preferred
    return ModelProfile("scale", max_batch_size, instances, batching, False, 50.0, "slo", 50.0, None)


@pytest.mark.parametrize(("batch", "max_batch_size", "small"), [
    (1.9, 2, True), (2.0, 2, False), (3.9, 8, True), (4.0, 8, False), (1.5, 1, True), (15.9, 32, True),
])
def test_small_batches_are_under_half_the_maximum_and_at_least_two(batch, max_batch_size, small):
    assert small_batches(batch, max_batch_size) is small


def test_queueing_with_small_batches_says_lower_the_delay():
    problem, fix = batching_advice(profile_of(delay_us=5000), batch=1.5, share=0.8, queue_max=0.5)
    assert problem == "requests spend 80% of server latency queued while batches stay small (1.5)"
    assert fix.startswith("lower max_queue_delay_microseconds (now 5000) or add instances")


def test_queueing_with_full_batches_says_add_instances():
    problem, fix = batching_advice(profile_of(instances=2), batch=7.5, share=0.6, queue_max=0.5)
    assert problem == "requests spend 60% of server latency queued with full batches (7.5 of 8)"
    assert fix == ("add instances (instance_group count, now 2) or raise max_batch_size (now 8): the model is the "
                   "bottleneck, not the batcher")


def test_small_batches_without_a_queue_say_raise_the_delay():
    problem, fix = batching_advice(profile_of(delay_us=0), batch=1.2, share=0.1, queue_max=0.5)
    assert problem == "batches stay small (1.2 of max 8) under saturation"
    assert "raise max_queue_delay_microseconds (now 0)" in fix
    assert batching_advice(profile_of(delay_us=0), batch=1.2, share=None, queue_max=0.5)[0] == problem


def test_full_batches_and_a_short_queue_need_no_advice():
    assert batching_advice(profile_of(), batch=6.0, share=0.2, queue_max=0.5) is None
    assert batching_advice(profile_of(), batch=6.0, share=0.5, queue_max=0.5) is None  # at the limit is fine


def test_preferred_sizes_are_judged_against_the_smallest():
    assert far_from_preferred(2.9, [4, 8], 0.75)  # 0.75 x 4 = 3
    assert not far_from_preferred(3.0, [8, 4], 0.75)
    assert not far_from_preferred(1.0, [], 0.75)
    assert profile_of(preferred=[4, 8]).preferred_batch_sizes == [4, 8]
    assert profile_of(max_batch_size=8, instances=3).saturation_concurrency == 48


# -- a measurement's reported stats: requests and time from the same windows --------------------------
def tally_with(ok: int, latency_s: float = 0.002, errors: int = 0) -> Tally:
    tally = Tally()
    for _ in range(ok):
        tally.ok(latency_s)
    for _ in range(errors):
        tally.error("UNAVAILABLE")
    return tally


def windows_of(counts: list[int], window_s: float = 2.0) -> tuple[list[Window], list[dict[str, Tally]]]:
    windows, tallies = [], []
    for i, n in enumerate(counts):
        by_model = {"m": tally_with(n)}
        stats = by_model["m"].summary(window_s)
        windows.append(Window(i, i * window_s, (i + 1) * window_s, stats, {"m": stats}))
        tallies.append(by_model)
    return windows, tallies


def test_reported_throughput_is_the_last_windows_requests_over_the_same_windows():
    windows, tallies = windows_of([50, 100, 100, 100, 100, 100, 100])  # 50 infer/s in 2 s windows
    stats = reported_stats(windows, tallies, stability_windows=5)
    assert stats.count_ok == 500
    assert stats.duration_s == pytest.approx(10.0)
    assert stats.throughput_infer_s == pytest.approx(50.0)


def test_fewer_tallies_kept_than_windows_reported_still_divide_by_their_own_windows():
    """Before the fix, 3 tallies (300 requests) were divided by 5 windows (10 s): 30 infer/s."""
    windows, tallies = windows_of([100] * 6)
    stats = reported_stats(windows, tallies[-3:], stability_windows=5)
    assert stats.count_ok == 300
    assert stats.duration_s == pytest.approx(6.0)
    assert stats.throughput_infer_s == pytest.approx(50.0)


def test_reported_stats_merge_models_and_errors_and_none_without_tallies():
    window = Window(0, 0.0, 1.0, tally_with(1).summary(1.0), {})
    tallies = [{"a": tally_with(30, errors=2), "b": tally_with(10)}]
    stats = reported_stats([window], tallies, stability_windows=3)
    assert (stats.count_ok, stats.count_errors, stats.throughput_infer_s) == (40, 2, 40.0)
    assert stats.success_rate == pytest.approx(40 / 42)
    assert reported_stats([window], [], stability_windows=3) is None


def test_the_engine_keeps_the_tallies_of_every_window_it_reports():
    from pytest_triton_ready.load.window_recorder import Recorder

    recorder = Recorder(["m"], start=0.0, warmup_s=0.0, window_s=1.0, timeline=None, keep_tallies=5)
    for second in range(7):
        recorder.ok("m", second + 0.5, 0.001)
    closed = recorder.roll(7.0)
    assert [c[0] for c in closed] == list(range(7))
    assert len(recorder.recent_tallies) == 5


# -- HdrHistogram tallies ----------------------------------------------------------------------------
def test_tally_summary_counts_throughput_and_success_rate():
    tally = tally_with(90, latency_s=0.010, errors=6)
    tally.drop(4)
    stats = tally.summary(duration_s=3.0)
    assert (stats.count_ok, stats.count_errors, stats.dropped, stats.attempted) == (90, 6, 4, 100)
    assert stats.throughput_infer_s == pytest.approx(30.0)
    assert stats.success_rate == pytest.approx(0.9)
    assert stats.p99_ms == pytest.approx(10.0, rel=RELATIVE_PRECISION)
    assert stats.mean_ms == pytest.approx(10.0)
    assert stats.to_dict()["throughput_infer_s"] == 30.0


def test_empty_tally_has_no_percentiles_and_no_throughput():
    stats = Tally().summary(duration_s=0.0)
    assert stats.throughput_infer_s == 0.0 and stats.success_rate is None
    assert stats.p50_ms is None and stats.mean_ms is None and stats.max_ms is None
    assert stats.client_cpu_us_per_request is None


def test_percentiles_of_a_known_distribution():
    tally = Tally()
    for ms in range(1, 101):  # 1..100 ms
        tally.ok(ms / 1000)
    stats = tally.summary(1.0)
    assert stats.p("p50") == pytest.approx(50, rel=RELATIVE_PRECISION)
    assert stats.p("p90") == pytest.approx(90, rel=RELATIVE_PRECISION)
    assert stats.p("p99") == pytest.approx(99, rel=RELATIVE_PRECISION)
    assert stats.max_ms == pytest.approx(100, rel=RELATIVE_PRECISION)
    assert stats.mean_ms == pytest.approx(50.5)
    assert [percentile_key(p) for p in (50.0, 99.0, 99.9)] == ["p50", "p99", "p99.9"]


def test_merged_tallies_add_up_and_span_both():
    one, two = tally_with(3), tally_with(5, errors=1)
    one.started, one.ended, two.started, two.ended = 10.0, 12.0, 11.0, 14.0
    one.client_cpu_s, two.client_cpu_s = 0.001, 0.002
    total = merged([one, two])
    assert (total.started, total.ended) == (10.0, 14.0)
    stats = total.summary()
    assert stats.duration_s == 4.0 and stats.count_ok == 8
    assert stats.client_cpu_us_per_request == pytest.approx(3000 / 9)


# -- stability and validity --------------------------------------------------------------------------
def stats_window(throughput: float, mean_ms: float | None):
    return SimpleNamespace(stats=SimpleNamespace(throughput_infer_s=throughput, mean_ms=mean_ms))


def test_stable_when_the_last_windows_spread_within_the_tolerance():
    rules = MeasureRules(stability_windows=3, stability_tolerance=0.10)
    windows = [stats_window(50, 30), stats_window(100, 10), stats_window(105, 10.5), stats_window(109, 10.9)]
    stable, detail = stability(windows, rules)
    assert stable
    assert detail == "last 3 windows: throughput spread 9.0%, mean latency spread 9.0% (limit 10%)"
    unstable, detail = stability(windows + [stats_window(125, 10)], rules)
    assert not unstable and "throughput spread 19.0%" in detail  # 125 / 105


def test_too_few_windows_or_an_empty_one_is_not_stable():
    rules = MeasureRules(stability_windows=5)
    assert stability([stats_window(10, 1)] * 4, rules) == (False, "only 4 of the 5 windows needed")
    empty = [stats_window(10, 1)] * 4 + [stats_window(0, None)]
    assert stability(empty, rules) == (False, "a window completed no request")


def test_validity_needs_the_duration_and_the_requests():
    rules = MeasureRules(min_duration_s=6.0, min_requests=200)
    assert validity(6.0, 200, rules) == (True, "6.00 s and 200 requests measured")
    assert validity(5.5, 150, rules) == (False, "measured 5.50 s < minimum 6 s; 150 requests < minimum 200")
    assert validity(6.0 - 1e-12, 500, rules)[0]  # a float sum of windows just under the minimum counts


def test_rules_describe_themselves_in_one_sentence():
    assert MeasureRules().describe() == (
        "warm-up 1 s, windows of 0.5 s, stable when the last 3 windows' throughput and mean latency are within "
        "10% (max/min), valid with >= 2 s and >= 200 requests, at most 24 windows; a judged rule is decided "
        "when its 95% interval lies on one side of its threshold")


# -- the timeline's bins -----------------------------------------------------------------------------
def test_outcomes_land_in_the_bin_of_their_time_and_empty_bins_are_kept():
    timeline = Timeline(start=100.0, bin_s=0.5)
    timeline.ok(100.1, 0.010)
    timeline.ok(100.2, 0.030)
    timeline.error(100.7)
    timeline.drop(101.6)
    timeline.event("kill", at=100.75)
    timeline.finish(101.7)
    bins = [(b.t_s, b.ok, b.errors, b.dropped) for b in timeline.bins]
    assert bins == [(0.0, 2, 0, 0), (0.5, 0, 1, 0), (1.0, 0, 0, 0), (1.5, 0, 0, 1)]
    assert timeline.bins[0].p99_ms == pytest.approx(30, rel=0.01)
    assert timeline.bins[1].p50_ms is None
    series, markers = timeline.chart_series()
    assert series["errors per bin"] == [(0.0, 0.0), (0.5, 1.0), (1.0, 0.0), (1.5, 0.0)]
    assert markers == [{"x": 0.75, "label": "kill"}]


def test_the_timeline_keeps_at_most_max_bins_and_refuses_a_zero_bin():
    timeline = Timeline(start=0.0, bin_s=1.0, max_bins=3)
    timeline.tick(10.0)
    assert [b.t_s for b in timeline.bins] == [7.0, 8.0, 9.0]
    with pytest.raises(ValueError, match="timeline bin must be positive"):
        Timeline(start=0.0, bin_s=0)


# -- the shared model helpers ------------------------------------------------------------------------
@pytest.mark.parametrize(("config", "count"), [
    ({}, 1),
    ({"instance_group": []}, 1),
    ({"instance_group": [{"count": 3, "kind": "KIND_CPU"}]}, 3),
    ({"instance_group": [{"count": 2, "kind": "KIND_GPU", "gpus": [0, 1, 2]}]}, 6),
    ({"instance_group": [{"count": 2, "kind": "KIND_CPU", "gpus": [0, 1]}]}, 2),  # gpus only count on GPU groups
    ({"instance_group": [{"kind": "KIND_GPU"}, {"count": 2, "kind": "KIND_CPU"}]}, 3),
    ({"instance_group": [{"count": 0}]}, 1),
])
def test_instance_count_from_the_effective_config(config, count):
    assert instance_count(config) == count


class FakeClient:
    def repository_index(self):
        return [{"name": "a", "version": "1", "state": "READY"}, {"name": "b", "version": "1", "state": "UNAVAILABLE"},
                {"name": "c", "version": "1", "state": "UNAVAILABLE"}, {"name": "c", "version": "2", "state": "READY"},
                {"name": "d"}]

    def model_config(self, model):
        return {}


def test_ready_models_keep_the_scope_order_and_any_ready_version():
    assert ready_names(FakeClient()) == {"a", "c"}
    target = SimpleNamespace(client=FakeClient(), models=lambda: ["c", "b", "z", "a"])
    assert ready_models(target) == ["c", "a"]


# -- the capacity search past the rule of thumb ---------------------------------------------------------
def _run_search(search: CapacitySearch, curve) -> list[CurvePoint]:
    """Feed `search` points from `curve(concurrency) -> (throughput, p99, success)` until it stops."""
    points: list[CurvePoint] = []
    while (level := search.next_level(points)) is not None:
        throughput, p99, success = curve(level)
        points.append(CurvePoint(level, throughput, p99 / 2, p99, success, True, p99_interval=_p99_interval(p99)))
        assert len(points) < 40, "the search does not end"
    return points


def test_search_goes_past_the_rule_of_thumb_until_throughput_stops_rising():
    search = CapacitySearch(max_batch_size=4, instances=1, budget_p99_ms=100, success_min=0.999)
    points = _run_search(search, lambda c: (min(c, 64) * 100.0, 5.0, 1.0))  # saturates at concurrency 64
    assert [p.concurrency for p in points] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert search.rule_of_thumb == 8 and search.reason == PLATEAU
    assert capacity(points, 100, 0.999).concurrency == 64 and not search.capacity_is_lower_bound(points)


def test_search_bisects_where_p99_leaves_the_budget():
    search = CapacitySearch(max_batch_size=2, instances=1, budget_p99_ms=50, success_min=0.999)
    points = _run_search(search, lambda c: (c * 100.0, c * 1.0, 1.0))  # p99 = c ms: over budget past 50
    assert [p.concurrency for p in points] == [1, 2, 4, 8, 16, 32, 64, 48, 56]
    assert search.reason == OVER_BUDGET
    assert capacity(points, 50, 0.999).concurrency == 48


def test_search_stops_at_errors_and_at_its_bound_with_a_lower_bound():
    errors = CapacitySearch(max_batch_size=2, instances=1, budget_p99_ms=50, success_min=0.999)
    points = _run_search(errors, lambda c: (c * 100.0, 1.0, 1.0 if c < 16 else 0.9))
    assert points[-1].concurrency == 16 and errors.reason == ERRORS
    bounded = CapacitySearch(max_batch_size=2, instances=1, budget_p99_ms=50, success_min=0.999, max_concurrency=32)
    points = _run_search(bounded, lambda c: (c * 100.0, 1.0, 1.0))  # still rising at the bound
    assert points[-1].concurrency == 32 and bounded.reason == BOUND
    assert bounded.capacity_is_lower_bound(points)


# -- server-side deltas ---------------------------------------------------------------------------
def _snapshot(at: float, success: int, queue_ns: int):
    from pytest_triton_ready.load.server_side import ServerSnapshot

    stats = {"inference_count": success, "execution_count": success,
             "inference_stats": {"success": {"count": success, "ns": success * 1000},
                                 "queue": {"count": success, "ns": queue_ns}}}
    return ServerSnapshot(at, stats={"scale": stats})


def test_server_deltas_of_one_server_give_per_request_times():
    from pytest_triton_ready.load.server_side import window_delta

    window = window_delta(_snapshot(0, 100, 1_000_000), _snapshot(1, 300, 3_000_000))
    assert window.mixed_servers is None
    assert window.models["scale"].success == 200 and window.models["scale"].stage_us["queue"] == 10.0


def test_counters_that_go_backwards_leave_the_whole_measurement_without_server_numbers():
    """Found behind nginx with three replicas and no fleet section: each snapshot reached another
    replica, and the deltas paired two servers' counters into plausible-looking queue times."""
    from pytest_triton_ready.load.engine import combine_server
    from pytest_triton_ready.load.server_side import MIXED_SERVERS, window_delta

    plausible = window_delta(_snapshot(0, 100, 1_000_000), _snapshot(1, 300, 3_000_000))
    backwards = window_delta(_snapshot(1, 300, 3_000_000), _snapshot(2, 250, 2_600_000))
    assert backwards.models == {}
    assert backwards.mixed_servers.startswith(f"scale: {MIXED_SERVERS} (inference_count 300 -> 250)")
    assert "fleet.replicas" in backwards.mixed_servers
    combined = combine_server([plausible, backwards])
    assert combined.models == {} and combined.mixed_servers == backwards.mixed_servers


def test_reads_of_the_statistics_prove_several_servers_only_when_a_counter_goes_backwards():
    import json

    from pytest_triton_ready.load.server_side import several_servers

    def body(count):
        return json.dumps({"model_stats": [{"name": "identity", "version": "1", "inference_count": count,
                                            "execution_count": count, "inference_stats": {}}]}).encode()

    assert several_servers([body(5), body(5), body(7), body(9)]) is None  # one busy server
    assert several_servers([body(6), body(5), body(6)]) == "identity: inference_count 6 -> 5"
    assert several_servers([body(5)]) is None


def test_requests_in_flight_when_the_traffic_stops_finish_uncounted_instead_of_being_cancelled():
    """Cancelling a gRPC call the server is answering crashed tritonserver 2.51 (SIGSEGV in
    pthread_mutex_lock, server issues #7368/#8034): a whole-checklist run lost its server in PERF-2."""
    import asyncio

    from pytest_triton_ready.load.requests import RequestPool
    from pytest_triton_ready.load.traffic import Traffic, TrafficPlan

    class SlowSender:
        def __init__(self):
            self.finished = self.cancelled = 0

        async def send(self, pool, request, counter):
            try:
                await asyncio.sleep(0.3)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            self.finished += 1
            return None

        async def close(self):
            pass

    sender = SlowSender()
    pool = RequestPool("m", "", 1, (object(),))
    plan = TrafficPlan({"m": pool}, "closed", concurrency={"m": 4}, duration_s=0.45, window_s=None, bin_s=None,
                       request_timeout_s=30)
    result = asyncio.run(Traffic(plan, sender).run())
    assert sender.cancelled == 0 and sender.finished == 8  # 4 in the measured 0.45 s, 4 left to finish
    assert result.stats.count_ok == 4 and result.in_flight_at_stop == 4


def test_an_open_loop_send_started_late_counts_its_lateness_apart_not_as_the_servers_latency():
    """The event loop blocked for 60 ms (the client's own stall): the requests due meanwhile go out
    late and are counted as late sends; their latency is the sender's 5 ms, not 5 ms plus their
    lateness (at 1,000 requests/s, the loop's millisecond timers alone added 0.5 ms to a 0.3 ms p50)."""
    import asyncio
    import time

    from pytest_triton_ready.load.requests import RequestPool
    from pytest_triton_ready.load.traffic import Traffic, TrafficPlan

    class FiveMsSender:
        async def send(self, pool, request, counter):
            await asyncio.sleep(0.005)
            return None

        async def close(self):
            pass

    async def run():
        pool = RequestPool("m", "", 1, (object(),))
        plan = TrafficPlan({"m": pool}, "open", rates={"m": 200.0}, duration_s=0.5, window_s=None, bin_s=None,
                           request_timeout_s=30, late_drop_s=1.0)
        traffic = Traffic(plan, FiveMsSender())
        running = asyncio.ensure_future(traffic.run())
        await asyncio.sleep(0.1)
        time.sleep(0.06)  # blocks the loop: the sends due in these 60 ms are late
        return await running

    stats = asyncio.run(run()).stats
    assert stats.late_sends >= 5, stats.to_dict()
    assert stats.dropped == 0 and stats.count_errors == 0
    assert stats.count_ok >= 80
    # from the send: about 5 ms for the late ones too (from the due instant, the 12 late ones would
    # read 5-65 ms and put p90 near 20 ms); only the one or two in flight during the stall read more
    assert stats.p("p90") < 15, stats.to_dict()
