"""The run budget without a server: estimates from the settings, shares as checks start, what a
spent budget leaves out (INCOMPLETE naming it), and the heartbeat that says what a step waits for."""

from __future__ import annotations

import json
import time

import pytest

from pytest_triton_ready import budget, estimates
from pytest_triton_ready.policy import plan_block
from pytest_triton_ready.settings import build_settings


def settings_with(tmp_path, text: str = "", **cli):
    config = tmp_path / "triton-ready.yaml"
    config.write_text(text)
    return build_settings({"triton_launch": "embedded", **cli}, {}, environ={}, config_file=str(config))


def test_budget_comes_from_the_cli_the_yaml_and_the_environment(tmp_path):
    assert settings_with(tmp_path).triton_budget is None
    assert settings_with(tmp_path, "run: {budget: 15m}\n").triton_budget == 900.0
    assert settings_with(tmp_path, triton_budget="1h30m").triton_budget == 5400.0
    assert build_settings({}, {}, environ={"TRITON_READY_BUDGET": "90s"}).triton_budget == 90.0
    with pytest.raises(Exception, match="--triton-budget from cli: expected a duration"):
        build_settings({"triton_budget": "soon"}, {}, environ={})


def test_estimates_follow_the_windows_the_models_the_soak_and_the_faults(tmp_path):
    settings = settings_with(tmp_path, "thresholds: {load_warmup_s: 1, load_window_s: 2, load_min_duration_s: 6, "
                                       "load_stability_windows: 3, curve_max_concurrency: 8}\nsoak: {duration: 30s}\n"
                                       "faults: {steady_s: 1, observe_s: 2, settle_s: 3}\n")
    assert estimates.point_seconds(settings) == 1 + 3 * 2
    shape = estimates.repository_shape(settings)  # the demo repository: accumulate (sequence), cached_sum, scale
    assert shape.models == 3 and shape.batched == 2 and shape.sweep_points == [4, 4, 4] and shape.known
    rows = {e.check_id: e for e in estimates.estimates(settings, ["CFG-2", "PERF-1", "PERF-2", "PERF-3", "PERF-4",
                                                               "SEC-1"])}
    assert rows["CFG-2"].seconds == 2 * 7 and rows["PERF-1"].seconds == 3 * 7
    assert rows["PERF-2"].seconds == 12 * 7 and "4+4+4 per model" in rows["PERF-2"].how
    assert rows["PERF-3"].seconds == 30 + 7
    assert rows["PERF-4"].seconds == (estimates.FAULT_KINDS_BUILT_IN * (6 + estimates.SERVER_START_S)
                                      + 2 * 3 * estimates.MODEL_LOAD_S)  # two restarts load the 3 models again
    assert "2 restarts x 3 model(s)" in rows["PERF-4"].how
    assert rows["SEC-1"].seconds == budget.READING_CHECK_S
    more = settings_with(tmp_path, "models: [scale, cached_sum, accumulate, scale_2]\n")
    assert estimates.repository_shape(more).models == 4  # a model list decides the count


def test_the_plan_shows_the_estimate_per_phase_and_the_budget_share(tmp_path):
    settings = settings_with(tmp_path, "run: {budget: 10m}\n")
    ids = ["PERF-1", "PERF-2", "SEC-1"]
    text = plan_block(settings, ids, estimate_lines=estimates.estimate_block(settings, ids))
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("  time estimate: about "))
    assert "budget 10:00 (run.budget / --triton-budget)" in head
    assert any(line.strip().startswith("PERF-2") and "sweep points" in line and "budget share" in line for line in lines)
    assert any(line.strip().startswith("others") and "1 reading check(s)" in line for line in lines)
    plain = settings_with(tmp_path)
    text = plan_block(plain, ["PERF-1"], estimate_lines=estimates.estimate_block(plain, ["PERF-1"]))
    assert "budget" not in text.split("time estimate", 1)[1].split("\n")[0]


def test_shares_follow_the_estimates_and_unused_time_goes_to_later_checks():
    now = [0.0]
    run = budget.RunBudget(100.0, {"CFG-2": 10.0, "PERF-2": 30.0, "PERF-3": 60.0}, clock=lambda: now[0])
    assert run.enter("CFG-2").share_s == pytest.approx(10.0)
    now[0] = 4.0  # CFG-2 used 4 s of its 10
    perf2 = run.enter("PERF-2")
    assert perf2.share_s == pytest.approx(96.0 * 30 / 90)
    assert run.enter("PERF-2") is perf2  # a second test of the same id shares the deadline
    now[0] = 4.0 + 20.0
    assert perf2.time_left() == pytest.approx(32.0 - 20.0) and perf2.allow(100) == pytest.approx(12.0)
    assert perf2.allow(5) == 5 and not perf2.expired and run.refusal("PERF-2", "a point") is None
    assert perf2.per_part(3) == pytest.approx(4.0)  # three models still to measure share the 12 s left
    now[0] = 40.0
    assert perf2.expired and perf2.allow(5) == 0
    reason = run.refusal("PERF-2", "the measurement of scale at concurrency 8 and what followed it")
    assert reason == ("run budget 1:40 (run.budget / --triton-budget) PERF-2's share of it (0:32) is spent; left out: "
                      "the measurement of scale at concurrency 8 and what followed it")
    assert run.refusal("PERF-2", "test_other (not started)", share=False) is None  # a test starts while any is left
    now[0] = 101.0
    assert "spent after 1:41" in run.refusal("PERF-3", "test_soak (not started)", share=False)
    assert run.cut == ["PERF-2: the measurement of scale at concurrency 8 and what followed it",
                       "PERF-3: test_soak (not started)"]


def test_without_a_budget_a_measurement_may_spend_what_it_asks():
    assert budget.current() is budget.UNBOUNDED
    assert budget.current().time_left() is None and budget.current().allow(42.0) == 42.0
    assert not budget.current().expired and budget.current().per_part(3) is None


class _Engine:
    def __init__(self):
        self.measured = []

    def measure(self, model, **kwargs):
        self.measured.append((model, kwargs))
        return "measurement"


def test_the_guard_refuses_a_measurement_once_the_check_share_is_spent():
    now = [0.0]
    run = budget.RunBudget(10.0, {"PERF-1": 5.0, "PERF-2": 5.0}, clock=lambda: now[0])
    engine = _Engine()
    guard = budget.BudgetGuard(engine)
    run.enter("PERF-1")
    budget.activate(run, "PERF-1")
    try:
        assert guard.measure("scale", concurrency=8) == "measurement"
        now[0] = 6.0
        with pytest.raises(pytest.skip.Exception, match=r"incomplete: run budget 0:10 .* PERF-1's share of it \(0:05\) "
                                                        r"is spent; left out: the measurement of scale at concurrency 8"):
            guard.measure("scale", concurrency=8)
        assert budget.current().check_id == "PERF-1"
    finally:
        budget.activate(None)
    assert engine.measured == [("scale", {"concurrency": 8})]


def test_a_spent_budget_leaves_later_load_checks_incomplete_naming_it_and_reading_checks_run(pytester):
    pytester.makepyfile(test_two="""
        import time
        import pytest

        @pytest.mark.triton_check(id="PERF-1")
        def test_first(check):
            '''Takes its time.'''
            time.sleep(0.3)
            check.measure("waited", 0.3, "s", threshold=1)

        @pytest.mark.triton_check(id="PERF-2")
        def test_second(check):
            '''Would pass.'''
            check.measure("nothing", 1, threshold=1)

        @pytest.mark.triton_check(id="OPS-9")
        def test_reading(check):
            '''Reads only.'''
            check.measure("read", 1, threshold=1)
    """)
    result = pytester.runpytest("--triton-budget=0.2s", "--triton-url=http://127.0.0.1:1",
                                f"--readiness-report={pytester.path / 'report'}", "-p", "no:cacheprovider")
    report = json.loads((pytester.path / "report" / "readiness.json").read_text())
    verdicts = {r["check_id"]: (r["verdict"], r.get("reason")) for r in report["results"]}
    assert verdicts["PERF-1"][0] == "pass" and verdicts["OPS-9"][0] == "pass"  # a reading check always runs
    assert verdicts["PERF-2"][0] == "incomplete", verdicts
    assert "run budget 0:00 (run.budget / --triton-budget) spent after" in verdicts["PERF-2"][1]
    assert verdicts["PERF-2"][1].endswith("left out: test_second (not started)")
    assert report["verdict"] != "READY" and result.ret != 0


def test_the_heartbeat_says_what_the_step_waits_for_instead_of_repeating_it():
    from pytest_triton_ready import progress

    lines = []
    with progress.running("PERF-2 curve", lines.append, quiet_s=0.0, heartbeat_s=0.2):
        progress.step("scale: concurrency 4 (point 3)")
        deadline = time.monotonic() + 5
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
        progress.step("scale: concurrency 4 (point 3)")  # the same step again is no news
        time.sleep(0.75)
        progress.waiting("the server to be ready again")
        time.sleep(0.9)
    steps = [line for line in lines if line.endswith(": scale: concurrency 4 (point 3)")]
    beats = [line for line in lines if ": waiting for " in line]
    assert len(steps) == 1, lines
    assert beats and beats[0].split(" s: ", 1)[1].startswith("waiting for scale: concurrency 4 (point 3) to finish ("), lines
    assert any("waiting for the server to be ready again (" in line for line in beats), lines
    assert len(beats) <= 3, lines  # 0.2 s, then 0.4 s, then 0.8 s of silence: the heartbeat backs off
