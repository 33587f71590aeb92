"""The load generator's own health on recorded windows (no server): a latency rule that would
fail on windows where the client fell behind (late sends, event-loop lag) ends INCOMPLETE with
the reason, never FAIL; a pass stands on loop lag alone, not on late sends; a saturated client makes a capacity a lower bound; the
health travels between processes and into the measurement's JSON."""

from __future__ import annotations

import json

import pytest
from default_settings import default_settings
from recorded_windows import recorded_windows, traffic_result

from pytest_triton_ready.load.client_health import ClientLimits, fell_behind, guard, record_client_health, saturated
from pytest_triton_ready.load.decision import FAIL, PASS, Rule, judge_measurement
from pytest_triton_ready.load.engine import LoadEngine, measurement_from
from pytest_triton_ready.load.judged import incomplete_unless_failed, record_judgement
from pytest_triton_ready.load.stability import MeasureRules
from pytest_triton_ready.load.stats import Tally
from pytest_triton_ready.load.traffic import Window
from pytest_triton_ready.performance.curve import CurvePoint
from pytest_triton_ready.record.model import Result
from pytest_triton_ready.record.recorder import CheckRecorder

P99_RULE = Rule("p99 latency", "p99", "<=", 100.0, "ms")
SUCCESS_RULE = Rule("success rate", "success rate", ">=", 0.999, "ratio", needs_validity=False)
RULES = MeasureRules(window_s=2.0, min_duration_s=6.0, max_windows=10)


def _check() -> CheckRecorder:
    return CheckRecorder(Result("PERF-1", "performance", "t", "checks/test_performance.py::t"), default_settings())


def behind_at(windows: list[Window], index: int, late: int, lag_ms: float) -> list[Window]:
    """`windows` with the client behind in window `index`: `late` late sends, a loop lag of `lag_ms`."""
    out = []
    for w in windows:
        tally = w.tallies["m"]
        if w.index == index:
            tally.late_sends += late
            tally.lag(lag_ms / 1000.0)
        else:
            tally.lag(0.0005)
        stats = tally.summary(w.end_s - w.start_s)
        out.append(Window(w.index, w.start_s, w.end_s, stats, {"m": stats}, tallies={"m": tally}))
    return out


def test_a_slow_window_while_the_client_fell_behind_is_incomplete_not_a_failure():
    windows = behind_at(recorded_windows(p99_ms=150.0, count=3, per_window=1600, spread=0.05), 2, late=88, lag_ms=40.0)
    engine = LoadEngine(None, "", "", settings=default_settings())
    measured = engine._guarded(measurement_from("m", traffic_result(windows), RULES, None, 300.0, "grpc",
                                                judged=[P99_RULE, SUCCESS_RULE]))
    p99, success = measured.judgements
    assert p99.outcome == ("the load generator fell behind (88 late sends in window 2, loop lag 40 ms): "
                           "run the client on its own cores or lower the rate")
    assert success.outcome == PASS  # only latency rules hear of the client
    check = _check()
    reason = record_judgement(check, p99, model="m", finding="m: p99 over budget")
    assert not check.errors
    with pytest.raises(pytest.skip.Exception, match=r"incomplete: m: p99 latency: the load generator fell behind "
                                                    r"\(88 late sends in window 2"):
        incomplete_unless_failed(check, reason)
    assert measured.too_close() == [f"p99 latency: {p99.outcome}"]
    client = json.loads(json.dumps(measured.to_dict()))["client"]
    assert client["late_sends"] == 88 and client["loop_lag_max_ms"] >= 40.0 and client["behind"]


def test_loop_lag_alone_beyond_the_threshold_is_behind_and_a_healthy_client_is_not():
    limits = ClientLimits(lag_max_ms=50.0)
    laggy = behind_at(recorded_windows(p99_ms=150.0, count=3), 1, late=0, lag_ms=120.0)
    assert fell_behind(laggy, limits).startswith("the load generator fell behind (0 late sends in window 1, "
                                                 "loop lag 120 ms)")
    healthy = behind_at(recorded_windows(p99_ms=150.0, count=3), 1, late=3, lag_ms=10.0)  # 3 of 600 late: noise
    assert fell_behind(healthy, limits) is None
    (p99,) = guard(judge_measurement([P99_RULE], healthy, RULES, "m"), healthy, limits)
    assert p99.outcome == FAIL  # the server's fault: judged as ever


def test_a_pass_stands_while_the_clients_loop_lagged():
    windows = behind_at(recorded_windows(p99_ms=4.0, count=3), 0, late=0, lag_ms=80.0)
    (p99,) = guard(judge_measurement([P99_RULE], windows, RULES, "m"), windows, ClientLimits())
    assert p99.outcome == PASS  # answers read late only add latency: within the budget all the same


def test_a_pass_on_windows_the_client_sent_late_is_not_a_pass():
    """Latency counts from the send: with 300 of 600 requests sent late the server was not given
    the load planned, so a latency within budget says nothing of it."""
    windows = behind_at(recorded_windows(p99_ms=4.0, count=3), 0, late=300, lag_ms=80.0)
    (p99,) = guard(judge_measurement([P99_RULE], windows, RULES, "m"), windows, ClientLimits())
    assert p99.outcome.startswith("the load generator fell behind (300 late sends in window 0")


def test_a_capacity_measured_on_a_saturated_client_is_a_lower_bound():
    windows = recorded_windows(p99_ms=4.0, count=3)
    for w in windows:
        w.tallies["m"].client_cpu_s = 1.9  # of a 2 s window: 0.95 cores
    measured = measurement_from("m", traffic_result(windows), RULES, 16, None, "grpc", judged=[P99_RULE])
    assert abs(measured.stats.client_cores - 0.95) < 1e-9
    assert measured.client_limited.startswith("limited by the load generator (0.95 cores of CPU for 1 load process")
    assert CurvePoint.measured(16, measured).client_limited == measured.client_limited
    assert saturated(measured.stats, 2, ClientLimits()) is None  # two processes: half a core each


def test_client_health_survives_the_trip_between_processes():
    one, two = Tally(), Tally()
    one.late_sends, two.late_sends = 4, 5
    one.lag(0.002)
    two.lag(0.041)
    total = Tally.from_wire(one.to_wire())
    total.merge(Tally.from_wire(two.to_wire()))
    stats = total.summary(1.0)
    assert stats.late_sends == 9
    assert abs(stats.loop_lag_max_ms - 41.0) < 0.1
    assert Tally.from_wire({**Tally().to_wire()}).loop_lag is None


def test_a_measurement_records_the_clients_health_with_units_on_the_check():
    windows = behind_at(recorded_windows(p99_ms=4.0, count=3), 1, late=7, lag_ms=12.0)
    for w in windows:
        w.tallies["m"].client_cpu_s = 1.9
    measured = measurement_from("m", traffic_result(windows), RULES, None, 300.0, "grpc", judged=[P99_RULE])
    check = _check()
    record_client_health(check, measured, "m")
    units = {m.name: (m.value, m.unit) for m in check.result.measurements}
    assert units["client late sends"] == (7, "requests")
    assert units["client event-loop lag max"][1] == "ms" and units["client event-loop lag max"][0] >= 12.0
    assert units["client CPU"] == (0.95, "cores")
    assert [f.message for f in check.result.findings][0].startswith(
        "m: throughput 300 infer/s limited by the load generator (0.95 cores")
