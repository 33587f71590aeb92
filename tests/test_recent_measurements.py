"""One load point measured once: a later check judges the same windows where its rules are settled
on them (LoadEngine.measure's `reuse`), and measures again where they are not, or where the server
changed in between."""

from __future__ import annotations

from dataclasses import replace

from default_settings import default_settings
from recorded_windows import recorded_windows, traffic_result

from pytest_triton_ready.load.decision import FAIL, PASS, Rule
from pytest_triton_ready.load.engine import LoadEngine, RecentMeasurements, measurement_from
from pytest_triton_ready.load.stability import MeasureRules

RULES = MeasureRules(window_s=2.0, min_duration_s=6.0, max_windows=10)
P99 = Rule("p99 latency", "p99", "<=", 100.0, "ms")
SUCCESS = Rule("success rate", "success rate", ">=", 0.999, "ratio", needs_validity=False)


def _measured(windows, judged):
    return measurement_from("m", traffic_result(windows), RULES, 8, None, "grpc", judged=judged)


class RecordedEngine(LoadEngine):
    """The engine with its traffic played back from recorded windows (5 ms p99, 3 windows of 2 s),
    counting how often it measured and with which warm-up."""

    def __init__(self) -> None:
        super().__init__(client=type("Client", (), {"changes": 0})(), grpc_url="", http_url="", settings=default_settings())
        self.measured, self.warmups, self.rules_used = 0, [], []

    def _measure(self, model, concurrency, rate, rules, protocol, batch_size, poisson, server_stats, workers,
                 stop_on_dead_instance, judged):
        self.measured += 1
        self.warmups.append(rules.warmup_s)
        self.rules_used.append(rules)
        return measurement_from(model, traffic_result(recorded_windows(5.0, 3, per_window=2000)), rules, concurrency,
                                rate, protocol,
                                judged=judged)


def test_a_later_question_settled_on_the_same_windows_is_judged_on_them():
    recent = RecentMeasurements()
    recent.keep(("m", 8), _measured(recorded_windows(5.0, 3), [P99, SUCCESS]))
    again = recent.judged_again(("m", 8), [Rule("p99 within a tighter budget", "p99", "<=", 20.0, "ms")])
    assert again is not None and again.reused_after_s is not None
    assert [j.outcome for j in again.judgements] == [PASS]
    failing = recent.judged_again(("m", 8), [Rule("p99 within 1 ms", "p99", "<=", 1.0, "ms")])
    assert [j.outcome for j in failing.judgements] == [FAIL]  # a decided failure is settled too


def test_a_question_the_windows_leave_undecided_is_measured_again():
    recent = RecentMeasurements()
    recent.keep(("m", 8), _measured(recorded_windows(5.0, 3, spread=0.3), [P99]))
    assert recent.judged_again(("m", 8), [Rule("p99 near its value", "p99", "<=", 5.0, "ms")]) is None
    assert recent.judged_again(("m", 16), [P99]) is None  # another load point was never measured


def test_windows_with_a_dead_instance_stand_in_for_nothing():
    recent = RecentMeasurements()
    windows = recorded_windows(5.0, 3, errors=6, error="StatusCode.INTERNAL: Failed to process the request(s) for "
                               "model instance 'scale_0_0', message: Stub process 'scale_0_0' is not healthy.")
    recent.keep(("m", 8), _measured(windows, [SUCCESS]))
    assert recent.judged_again(("m", 8), [SUCCESS]) is None


def test_the_engine_reuses_only_when_asked_and_forgets_once_the_server_changed():
    engine = RecordedEngine()
    engine.measure("m", concurrency=8, rules=RULES, judge=[P99])
    assert engine.measure("m", concurrency=8, rules=RULES, judge=[SUCCESS], reuse=True).reused_after_s is not None
    assert engine.measured == 1
    engine.measure("m", concurrency=8, rules=RULES, judge=[SUCCESS])  # not asked to reuse: measured
    assert engine.measured == 2
    engine.measure("m", concurrency=8, rules=MeasureRules(window_s=1.0), judge=[SUCCESS], reuse=True)
    assert engine.measured == 3  # other windows: another measurement
    engine.client.changes += 1  # a model loaded or unloaded through the run's client
    assert engine.measure("m", concurrency=8, rules=RULES, judge=[SUCCESS], reuse=True).reused_after_s is None
    assert engine.measured == 4
    engine.server_changed()  # a fault: a server restarted, an instance killed
    engine.measure("m", concurrency=8, rules=RULES, judge=[SUCCESS], reuse=True)
    assert engine.measured == 5
    engine.measure("m", concurrency=8, rules=replace(RULES, warmup_s=0.0), judge=[SUCCESS], reuse=True)
    assert engine.measured == 5  # the warm-up is not part of the windows


def test_a_model_measured_before_warms_up_briefly_until_the_server_changes():
    engine = RecordedEngine()
    engine.measure("m", concurrency=1, judge=[P99])
    engine.measure("m", concurrency=2, judge=[P99])
    engine.measure("other", concurrency=1, judge=[P99])
    engine.server_changed()
    engine.measure("m", concurrency=4, judge=[P99])
    engine.measure("m", concurrency=8, judge=[P99], rules=engine.rules(warmup_s=0.0))  # asked for none: none
    assert engine.warmups == [1.0, 0.25, 1.0, 1.0, 0.0]  # load_warmup_s, then load_rewarmup_s


def test_a_look_at_earlier_windows_is_counted_in_the_error_budget_of_the_measurement_after_it():
    """Issue 31: the reused windows' look came on top of a measurement's own looks, uncounted."""
    engine = RecordedEngine()
    engine.measure("m", concurrency=8, rules=RULES, judge=[P99])
    assert engine.rules_used[-1].extra_looks == 0  # nothing earlier to look at: its own looks only
    undecided = Rule("p99 near its value", "p99", "<=", 5.0, "ms")  # the recorded p99: undecided on them
    engine.measure("m", concurrency=8, rules=RULES, judge=[undecided], reuse=True)
    assert engine.measured == 2
    spent = engine.rules_used[-1]
    assert spent.extra_looks == 1 and spent.looks == RULES.looks + 1
    assert spent.look_level == 1 - (1 - RULES.confidence) / (len(RULES.look_windows) + 1)
    reused = engine.measure("m", concurrency=8, rules=RULES, judge=[SUCCESS], reuse=True)
    assert reused.reused_after_s is not None and engine.measured == 2


def test_the_reused_windows_are_judged_at_the_level_of_the_budget_they_share():
    windows = recorded_windows(5.0, 3, spread=0.3, seed=5)
    recent = RecentMeasurements()
    recent.keep(("m", 8), _measured(windows, [P99]))
    estimate_at = {}
    for extra in (0, 20):
        shared = replace(RULES, extra_looks=extra)
        again = recent.judged_again(("m", 8), [Rule("p99 within 100 ms", "p99", "<=", 100.0, "ms")], shared)
        estimate_at[extra] = again.judgements[0].estimate.interval
    assert estimate_at[20].high > estimate_at[0].high  # more looks sharing alpha: each one's interval wider
