"""Baselines, key numbers, history, CSV, console rows and progress: unit tests without a server,
plus the two PERF-5 runs against the shared demo server (a doctored baseline, the run's own previous
run)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from conftest import artifact_dir, assert_no_horizontal_scroll
from pytest_triton_ready.baseline import (
    ALL,
    NOT_REPRODUCED,
    REGRESSION,
    WITHIN_NOISE,
    BaselineError,
    compare,
    environment_differences,
    key_numbers,
    load_baseline,
    reconsider,
)
from pytest_triton_ready.baseline.compare import UNDECIDED
from pytest_triton_ready.record.model import MeasuredValue, Result, Verdict
from pytest_triton_ready.thresholds import THRESHOLDS

QUICK = Path(__file__).parent / "data" / "quick-checklist.yaml"


def _threshold(name):
    return THRESHOLDS[name].default


def _document(capacity=1000.0, p99=5.0, noise=0.01, verdict="READY", started="2025-11-20T01:00:00+00:00",
              server="2.51.0"):
    def m(name, value, unit, model="scale"):
        return {"name": name, "value": value, "unit": unit, "model": model}

    return {
        "kind": "triton-readiness", "verdict": verdict, "started_at": started,
        "context": {"server": {"version": server}, "models": [{"name": "scale", "version": "1", "state": "READY"}],
                    "gpus": {"gpus": []}},
        "results": [
            {"check_id": "PERF-1", "measurements": [m("p50 latency", 2.0, "ms"), m("p99 latency", p99, "ms"),
                                                   m("success rate", 1.0, "ratio")]},
            {"check_id": "PERF-2", "measurements": [m("max throughput within SLO", capacity, "infer/s")]},
            {"check_id": "PERF-3", "measurements": [m("p99 drift (last quarter / first quarter)", 1.1, "ratio", None),
                                                   m("server process tree RSS slope", 3.0, "MB/h", None)]},
            {"check_id": "PERF-4", "measurements": [m("time from SIGKILL until ready", 4.0, "s", None)]},
            {"check_id": "PERF-5", "measurements": [
                m("noise: throughput window spread (relative standard error)", noise, "ratio"),
                m("noise: p99 window spread (relative standard error)", noise, "ratio")]},
        ],
    }


def test_key_numbers_per_model_and_for_the_whole_run():
    numbers = key_numbers(_document())
    assert numbers["scale"] == {"capacity": 1000.0, "p50": 2.0, "p99": 5.0, "error_rate": 0.0,
                                "noise_throughput": 0.01, "noise_p99": 0.01}
    assert numbers[ALL] == {"soak_drift": 1.1, "leak_slope": 3.0, "recovery": 4.0}


def test_soak_drift_prints_as_a_ratio_and_a_leak_slope_not_judged_is_no_key_number():
    from pytest_triton_ready.report.summary import key_number_table

    document = _document()
    soak = document["results"][2]
    soak["measurements"][0]["value"] = 0.547  # p99 fell: last/first is 0.547, not "54.70%"
    soak["judgements"] = [{"rule": "p99-drift", "passed": True}]  # the leak rule was not judged
    document["key_numbers"] = key_numbers(document)
    assert "leak_slope" not in document["key_numbers"][ALL]
    headings, rows = key_number_table(document)
    cells = dict(zip(headings, dict(rows)["all models"], strict=True))
    assert cells["soak p99 drift (last/first)"].text == "0.547"
    assert "memory slope (worst) (MB/h)" not in cells
    soak["measurements"].append({"name": "server host used memory (nv_cpu_memory_used_bytes) slope", "value": 4320.0,
                                 "unit": "MB/h", "model": None})  # the whole host's memory, information only
    soak["judgements"].append({"rule": "server-memory-leak", "passed": True})
    assert key_numbers(document)[ALL]["leak_slope"] == 3.0
    scale = dict(zip(headings, dict(rows)["scale"], strict=True))
    assert scale["error rate at target load"].text == "0 %"  # a share stays a percentage


def test_doctored_baseline_with_30_percent_more_capacity_is_a_regression_naming_model_and_numbers():
    baseline = _document(capacity=1300.0)
    comparisons = compare(key_numbers(_document()), key_numbers(baseline), _threshold)
    regressions = [c for c in comparisons if c.status == REGRESSION]
    assert [(c.model, c.metric.key) for c in regressions] == [("scale", "capacity")]
    text = regressions[0].describe()
    assert text.startswith("scale: capacity within SLO 1000 infer/s vs 1300 infer/s in the baseline (-23.1%")
    assert "allows -10%" in text


def test_same_numbers_pass_and_a_noise_band_wider_than_the_rule_widens_nothing():
    """Issue 23 e: the noise band is capped at the rule's threshold; +30 % p99 against a 20 % rule is a
    regression even when the runs' noise (2 x sqrt(0.12² + 0.12²) = 34 %) is wider than the rule."""
    same = compare(key_numbers(_document()), key_numbers(_document()), _threshold)
    assert same and all(c.status in ("ok", "improved") for c in same)
    noisy_now, noisy_then = _document(p99=6.5, noise=0.12), _document(p99=5.0, noise=0.12)
    p99 = {c.metric.key: c for c in compare(key_numbers(noisy_now), key_numbers(noisy_then), _threshold)}["p99"]
    assert p99.status == REGRESSION and p99.noise == 0.20 and round(p99.measured_noise, 2) == 0.34
    assert "the runs' noise is ±33.9%, wider than the rule: the rule stands" in p99.describe()
    quiet = {c.metric.key: c.status for c in compare(key_numbers(_document(p99=6.5)), key_numbers(_document()), _threshold)}
    assert quiet["p99"] == REGRESSION
    [recovery] = compare({ALL: {"recovery": 0.9}}, {ALL: {"recovery": 0.5}}, _threshold)
    assert recovery.status == WITHIN_NOISE  # +80 %, but 0.4 s under regression_recovery_floor_s


def test_a_streaming_token_capacity_drop_between_the_rule_and_the_default_noise_fails():
    """Issue 23 e: with no recorded spread, the streaming noise band (2 x sqrt(2) x 5 % = 14 %) used
    to swallow a 10-14 % token-capacity drop; capped at the 10 % rule, a 12 % drop is a regression."""
    now, then = {"llm": {"tokens_capacity": 880.0}}, {"llm": {"tokens_capacity": 1000.0}}
    [drop] = compare(now, then, _threshold)
    assert drop.status == REGRESSION and drop.noise == 0.10
    measured = {"llm": {"tokens_capacity": 880.0, "noise_streaming_tokens": 0.01}}
    [quiet] = compare(measured, {"llm": {"tokens_capacity": 1000.0, "noise_streaming_tokens": 0.01}}, _threshold)
    assert quiet.status == REGRESSION and round(quiet.noise, 4) == 0.0283  # the streaming spread PERF-5 measured


def test_a_regression_decided_on_its_first_look_stands_whatever_the_repeat():
    """Issue 31: main cleared a -15 % capacity when the mean with a -4 % repeat was within the rule.
    With the runs' noise (2 x sqrt(2) x 1 %, se 1.41 %), the first look's one-sided interval at
    1 - 0.05 / 2 (-15 % +- 2.8 %) lies beyond -10 %: decided, the second look cannot clear it."""
    regressed = {c.metric.key: c for c in compare(key_numbers(_document(capacity=850.0, p99=6.5)),
                                                  key_numbers(_document()), _threshold)}
    assert regressed["capacity"].status == regressed["p99"].status == REGRESSION
    stands = reconsider(regressed["capacity"], 960.0, _threshold)
    assert stands.status == REGRESSION and stands.repeat is None and stands.current == 850.0
    assert round(stands.look_margin, 4) == 0.0277  # z(0.975) x 0.0283 / 2
    assert "(-15.0%, decided on the first look with ±2.8%; the rule allows -10%" in stands.describe()
    assert reconsider(regressed["p99"], 5.2, _threshold).status == REGRESSION  # +30 % +- 2.8 % against +20 %


def test_a_regression_inside_the_noise_gets_a_second_look_judged_alone_at_half_the_alpha():
    near = {c.metric.key: c for c in compare(key_numbers(_document(capacity=880.0, p99=6.1)),
                                             key_numbers(_document()), _threshold)}
    assert near["capacity"].status == REGRESSION  # -12 %: beyond -10 % by value, not by its interval
    cleared = reconsider(near["capacity"], 960.0, _threshold)  # -4 % + 2.8 % is within -10 %
    assert cleared.status == NOT_REPRODUCED and (cleared.current, cleared.repeat) == (880.0, 960.0)
    assert cleared.describe().startswith("scale: capacity within SLO 880 infer/s on the first look, 960 infer/s on "
                                         "the planned second look, vs 1000 infer/s in the baseline (-4.0% on the "
                                         "second look, each look judged alone with ±2.8%; the rule allows -10%")
    close = reconsider(near["capacity"], 910.0, _threshold)  # -9 %: within by value, not with +2.8 %
    assert close.status == UNDECIDED and round(close.change, 3) == -0.09
    assert reconsider(near["capacity"], 960.0 - 80.0, _threshold).status == REGRESSION  # the repeat shows it too
    assert reconsider(near["p99"], 5.2, _threshold).status == NOT_REPRODUCED  # +22 % first, +4 % alone
    assert reconsider(near["p99"], 5.95, _threshold).status == UNDECIDED  # +19 % + 2.8 % reaches past +20 %
    tokens = compare({"llm": {"tokens_capacity": 880.0}}, {"llm": {"tokens_capacity": 1000.0}}, _threshold)[0]
    assert reconsider(tokens, 990.0, _threshold).status == UNDECIDED  # the default 5 % noise: +-13.9 %
    recovery = compare(key_numbers(_document()), key_numbers(_document()), _threshold)
    not_repeatable = next(c for c in recovery if c.metric.key == "recovery")
    not_repeatable.status = REGRESSION
    assert reconsider(not_repeatable, 0.0, _threshold) is not_repeatable  # nothing in the run measures it again


def test_baseline_from_a_directory_is_the_newest_ready_run_and_differences_are_named(tmp_path):
    for name, verdict, started in (("a", "READY", "2025-11-20"), ("b", "READY", "2025-11-21"),
                                   ("c", "NOT READY", "2025-11-22")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "readiness.json").write_text(json.dumps(_document(verdict=verdict, started=started)))
    assert load_baseline(tmp_path).path == tmp_path / "b" / "readiness.json"
    assert load_baseline(tmp_path, exclude=tmp_path / "b").path == tmp_path / "a" / "readiness.json"
    with pytest.raises(BaselineError, match="no such file"):
        load_baseline(tmp_path / "missing")
    other = _document(server="2.52.0")
    other["context"]["gpus"] = {"gpus": [{"name": "NVIDIA H200"}]}
    assert environment_differences(_document(), other) == [
        "server version 2.51.0 here, 2.52.0 in the baseline", "GPUs none here, NVIDIA H200 in the baseline"]


def test_csv_has_one_row_per_measurement_and_curves_in_perf_analyzer_columns(tmp_path):
    from pytest_triton_ready.performance.curve import CurvePoint
    from pytest_triton_ready.report.csvfiles import write_csv

    document = _document()
    measured = CurvePoint(1, 400.0, 1.25, 2.5, 1.0, True, None, 1.8, 2.1, 1.5,
                          {"queue": 120.4, "compute_input": 20.0, "compute_infer": 800.0, "compute_output": 9.6})
    no_server = CurvePoint(2, 610.5, 1.5, 3.0, 0.999, False, "unstable", 2.0, 2.2, 1.7, None)
    busy = CurvePoint(4, 700.0, 4.0, 9.0, 1.0, True, None, 6.0, 7.0, 0.5,  # server time above the mean: capped at 0
                      {"queue": 400.0, "compute_input": 10.0, "compute_infer": 300.0, "compute_output": 10.0})
    perf2 = document["results"][1]
    perf2["load_points"] = [p.for_report(model) for p, model in ((busy, "scale"), (measured, "scale"),
                                                                  (no_server, "scale"), (measured, "accumulate"))]
    perf2["load_points"] = [vars(p) for p in perf2["load_points"]]
    for result in document["results"]:
        result.update(phase="performance", verdict="pass")
    written = write_csv(document, tmp_path)
    rows = written["csv"].read_text().splitlines()
    assert rows[0] == "check_id,phase,check_verdict,model,name,value,unit,threshold,comparison,passed,threshold_source"
    assert len(rows) == 1 + sum(len(r["measurements"]) for r in document["results"])
    curves = written["curves_csv"].read_text().splitlines()
    assert curves[0] == (
        "Model,Concurrency,Inferences/Second,Client Send (us),Network+Server Send/Recv (us),Server Queue (us),"
        "Server Compute Input (us),Server Compute Infer (us),Server Compute Output (us),Client Recv (us),"
        "p50 latency (us),p90 latency (us),p95 latency (us),p99 latency (us),Avg latency (us),Success Rate (ratio),"
        "Stable and Valid,Inferences/Second Low,Inferences/Second High,p99 latency Low (us),p99 latency High (us)")
    assert curves[1:] == [  # sorted by model, then concurrency; Client Send/Recv are never measured: empty
        "accumulate,1,400.0,,550,120,20,800,10,,1250,1800,2100,2500,1500,1.0,yes,,,,",
        "scale,1,400.0,,550,120,20,800,10,,1250,1800,2100,2500,1500,1.0,yes,,,,",
        "scale,2,610.5,,,,,,,,1500,2000,2200,3000,1700,0.999,no,,,,",
        "scale,4,700.0,,0,400,10,300,10,,4000,6000,7000,9000,500,1.0,yes,,,,"]


def test_curves_csv_of_a_report_without_load_points_comes_from_the_measurements(tmp_path):
    from pytest_triton_ready.report.csvfiles import CURVE_COLUMNS, write_csv

    document = _document()
    document["results"][1]["measurements"] += [
        {"name": "throughput at concurrency 1", "value": 400.0, "unit": "infer/s", "model": "scale"},
        {"name": "p99 at concurrency 1", "value": 2.5, "unit": "ms", "model": "scale"}]
    document["results"][1]["charts"] = [{"title": "scale: latency vs concurrency", "x_label": "concurrency",
                                         "series": [{"name": "p50", "points": [[1, 1.25]]}]}]
    for result in document["results"]:
        result.update(phase="performance", verdict="pass")
    curves = write_csv(document, tmp_path)["curves_csv"].read_text().splitlines()
    row = dict(zip(CURVE_COLUMNS, curves[1].split(","), strict=True))
    assert {k: v for k, v in row.items() if v} == {"Model": "scale", "Concurrency": "1", "Inferences/Second": "400.0",
                                                  "p50 latency (us)": "1250", "p99 latency (us)": "2500"}


def test_console_rows_of_one_check_stay_distinct_at_80_columns():
    from pytest_triton_ready.report.terminal import checklist_rows

    same = "With every model loaded, the memory in use stays below its limit with headroom on "
    results = [Result("CFG-4", "config", same + "each GPU", "t.py::test_gpu_memory_headroom"),
               Result("CFG-4", "config", same + "the host", "t.py::test_host_memory_headroom")]
    heads = [row.head for row in checklist_rows(results, 80)]
    assert len(set(heads)) == 2 and "gpu memory headroom" in heads[0]
    assert all(len(row.head) + len(row.verdict) <= 80 for row in checklist_rows(results, 80))


def test_passing_rows_show_their_key_number_and_evidence_renders_as_a_definition_list():
    from pytest_triton_ready.record.text import detail
    from pytest_triton_ready.report.summary import structured

    result = Result("PERF-1", "performance", "t", "n", Verdict.PASS, measurements=[
        MeasuredValue("throughput", 900.0, "infer/s", "scale"),
        MeasuredValue("p99 latency", 4.9, "ms", "scale", 100.0, "<=", "default", True),
        MeasuredValue("success rate", 1.0, "ratio", "scale", 0.999, ">=", "default", True)])
    assert detail(result) == "scale: p99 latency 4.9 ms <= 100 ms"
    shape, items = structured(str({"count_ok": 29062, "errors": {}, "percentiles_ms": {"p50": 1.5}}))
    assert shape == "dl" and ("count_ok", "29062") in items and ("percentiles_ms.p50", "1.5") in items
    assert structured("plain text")[0] == "text"


def test_progress_lines_come_after_the_quiet_time_and_on_each_step():
    from pytest_triton_ready import progress

    lines = []
    now = [0.0]
    with progress.running("PERF-2 curve", lines.append, clock=lambda: now[0], quiet_s=3.0, heartbeat_s=600) as p:
        progress.step("scale: concurrency 1 (1 of 4)")
        assert lines == []  # quiet during the first seconds
        now[0] = 5.0
        progress.step("scale: concurrency 2 (2 of 4)")
    assert lines == ["  PERF-2 curve ... 5 s: scale: concurrency 2 (2 of 4)"]
    progress.step("outside any check")  # no-op
    assert p.lines == lines


def test_a_step_too_soon_after_a_line_is_shown_once_the_gap_has_passed(monkeypatch):
    import time

    from pytest_triton_ready import progress

    monkeypatch.setattr(progress, "MIN_GAP_S", 0.5)
    lines = []
    with progress.running("PERF-4 test_x", lines.append, quiet_s=0.0, heartbeat_s=600):
        deadline = time.monotonic() + 5
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
        progress.step("server restart (scale): fault injected (SIGKILL), observing the recovery")
        assert len(lines) == 1  # within MIN_GAP_S of the first line: not yet
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert lines[1].endswith(": server restart (scale): fault injected (SIGKILL), observing the recovery"), lines
    assert len(lines) == 2


def test_status_waits_for_the_heartbeat_and_a_check_with_its_own_line_gets_no_more():
    import time

    from pytest_triton_ready import progress
    from pytest_triton_ready.soak.status_line import ProgressLine

    lines = []
    with progress.running("PERF-3 streams", lines.append, quiet_s=0.05, heartbeat_s=0.2) as p:
        progress.status("scale: stream soak 5 of 60 s, 4 streams")
        deadline = time.monotonic() + 5
        while not any(line.endswith("stream soak 5 of 60 s, 4 streams") for line in lines) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert lines and lines[-1].startswith("  PERF-3 streams ... 0 s: scale: stream soak 5 of 60 s"), lines
        soak_lines = []
        ProgressLine(write=soak_lines.append, tty=False).show("PERF-3 soak 0:01/1:00 | first window not closed yet")
        shown = len(lines)
        progress.step("a step after the soak's own line took over")
        time.sleep(0.3)  # more than a heartbeat
    assert len(lines) == shown and p.lines == lines
    assert soak_lines == ["PERF-3 soak 0:01/1:00 | first window not closed yet\n"]


def test_progress_after_is_a_setting_with_the_progress_default(tmp_path):
    from pytest_triton_ready.progress import QUIET_S
    from pytest_triton_ready.settings import build_settings

    assert build_settings({}, {}, environ={}).triton_progress_after == QUIET_S == 3.0
    config = tmp_path / "triton-ready.yaml"
    config.write_text("report:\n  progress_after_s: 0.5\n")
    settings = build_settings({}, {}, environ={}, config_file=str(config))
    assert settings.triton_progress_after == 0.5 and settings.sources["triton_progress_after"].startswith("yaml:")
    assert build_settings({}, {}, environ={"TRITON_READY_PROGRESS_AFTER": "0"}).triton_progress_after == 0.0


def test_server_log_excerpt_keeps_new_warnings_and_errors_only():
    from pytest_triton_ready.plugin.results import severe_log_lines

    log = ("I1130 21:40:00.1 1 server.cc:1] started\n"
           "W1130 21:40:01.2 1 pinned_memory.cc:2] pinned memory pool not set\n"
           "E1130 21:40:02.3 1 model.cc:3] stub crashed\n"
           "| banner | table |")
    shown: set[str] = set()
    first = severe_log_lines(log, shown)
    assert [line[:5] for line in first] == ["W1130", "E1130"]
    shown.update(first)
    assert severe_log_lines(log, shown) == []


def _three_runs(root: Path) -> None:
    for night in range(3):
        document = _document(capacity=1000.0 - 50 * night, p99=5.0 + night, started=f"2025-11-2{night}T01:00:00+00:00",
                             verdict="READY" if night < 2 else "NOT READY")
        (root / f"night-{night}").mkdir(parents=True)
        (root / f"night-{night}" / "readiness.json").write_text(json.dumps(document))


def _nights(count: int) -> list[dict]:
    return [{"path": Path(f"/runs/night-{n}/readiness.json"), "verdict": "READY", "server": "2.51.0",
             "started_at": f"2025-{1 + n // 28:02d}-{1 + n % 28:02d}T01:00:00+00:00",
             "numbers": {"scale": {"capacity": 1000.0 + n, "p99": 5.0}, "accumulate": {"capacity": 900.0 - n}}}
            for n in range(count)]


@pytest.mark.parametrize(("runs", "labelled"), [(3, 3), (60, range(3, 9))])
def test_history_run_labels_never_collide(runs, labelled):
    """Each run keeps a tick; labels are thinned to every k-th (the newest always written) so that,
    drawn, no two touch and all stay inside the figure: all of 3 runs, a handful of 60."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from pytest_triton_ready.report.charts import chart_figure
    from pytest_triton_ready.report.history import _label, trend_charts

    nights = _nights(runs)
    chart = next(c for c in trend_charts(nights) if c.title.startswith("capacity"))
    figure = chart_figure(chart)
    FigureCanvasAgg(figure).draw()
    renderer = figure.canvas.get_renderer()
    ax = figure.axes[0]
    labels = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
    assert len(labels) in (labelled if isinstance(labelled, range) else [labelled])
    assert labels[-1].get_text() == _label(nights[-1])  # the newest run is always named
    assert {*ax.get_xticks(), *ax.get_xticks(minor=True)} == set(range(runs))  # a tick per run, labelled or not
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert all(left.x1 < right.x0 for left, right in zip(boxes, boxes[1:], strict=False)), boxes
    width = figure.get_window_extent(renderer).width
    assert all(0 <= box.x0 and box.x1 <= width for box in boxes)


def test_history_over_three_runs_renders_trends(tmp_path, browser):
    from pytest_triton_ready.cli import main

    _three_runs(tmp_path / "runs")
    assert main(["history", str(tmp_path / "runs")]) == 0
    markdown = (tmp_path / "runs" / "history.md").read_text()
    assert "# Triton readiness history: 3 runs" in markdown and "| 2025-11-22 01:00 | NOT READY |" in markdown
    html = (tmp_path / "runs" / "history.html").read_text()
    assert html.count('<svg class="chart') >= 5 and "<script" not in html
    assert main(["history", str(tmp_path / "empty")]) == 2
    if browser is None:
        pytest.skip("the browser check needs chromium and chromium-driver")
    from selenium.webdriver.common.by import By

    browser.get((tmp_path / "runs" / "history.html").resolve().as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "#history-table tbody tr")
    assert [r.get_attribute("data-verdict") for r in rows] == ["NOT READY", "READY", "READY"]
    charts = browser.find_elements(By.CSS_SELECTOR, "#trends svg.chart")
    assert len(charts) >= 5 and all(c.size["width"] > 300 and c.size["height"] > 100 for c in charts)
    assert browser.get_log("browser") == []
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert_no_horizontal_scroll(browser)
    browser.set_window_size(1280, 2400)
    assert browser.save_screenshot(str(artifact_dir() / "history-three-runs.png"))
    browser.set_window_size(1280, 900)


# -- PERF-5 against the shared demo server ----------------------------------------------------------
PERF_FILES = ("test_performance.py", "test_regression.py")
PERF_SELECT = ("-k", "benchmark_meets or throughput_latency or regression")


def _first_run(run_checklist, tmp_path):
    first = run_checklist(*PERF_FILES, url="own", args=(*PERF_SELECT, f"--triton-config={QUICK}"))
    report = first.report
    assert first.result("test_no_regression_against_baseline")["verdict"] == "incomplete"  # no baseline yet
    assert report["key_numbers"], report["key_numbers"]
    document = copy.deepcopy(report)
    document["verdict"] = "READY"  # a directory of runs offers its newest READY one
    return document


def test_perf5_fails_against_a_baseline_doctored_to_more_capacity(run_checklist, tmp_path, browser):
    """End to end through two real runs. The baseline's capacity is doubled, not raised by 30%: two
    consecutive quick runs on 2 shared cores differ by up to a third in capacity, so a 30% doctoring
    would sometimes fall inside run-to-run noise; the 30% rule itself is tested exactly above
    (test_doctored_baseline_with_30_percent_more_capacity_is_a_regression_naming_model_and_numbers)."""
    document = _first_run(run_checklist, tmp_path)
    for result in document["results"]:
        for m in result["measurements"]:
            if result["check_id"] == "PERF-2" and m["name"] == "max throughput within SLO":
                m["value"] = round(m["value"] * 2.0, 1)
    doctored_path = tmp_path / "doctored.json"
    doctored_path.write_text(json.dumps(document))
    worse = run_checklist(*PERF_FILES, url="own", args=(*PERF_SELECT, f"--triton-config={QUICK}", f"--triton-baseline={doctored_path}"))
    perf5 = worse.result("test_no_regression_against_baseline")
    assert perf5["verdict"] == "fail", perf5
    regressions = [f["message"] for f in perf5["findings"] if f["severity"] == "error"]
    capacity = [m for m in regressions if "capacity within SLO" in m and "infer/s in the baseline" in m]
    assert capacity, regressions  # other key numbers may move too on a busy machine
    assert all(m.split(":")[1].strip() in ("accumulate", "cached_sum", "scale") for m in capacity), capacity
    assert worse.report["baseline"]["path"] == str(doctored_path)
    first_screen(browser, worse.report_dir / "readiness.html", "first-screen-verdict-and-key-numbers.png")


def test_perf5_passes_against_its_own_previous_run(run_checklist, tmp_path):
    """Two quick runs, one after the other, against the same server. The rules' thresholds are sized
    for this machine, as a team sizes them for its runners: on 2 shared cores with other test runs
    alongside, the better of a run's two capacity measurements still fell 11-18 % below the previous
    run's and p50 rose up to 46 % (quiet: capacity within 10 %). The default thresholds (10 % capacity,
    20 % latency) are judged exactly by the unit tests above, and the doctored baseline fails with them."""
    document = _first_run(run_checklist, tmp_path)
    runs = tmp_path / "runs"
    (runs / "previous").mkdir(parents=True)
    (runs / "previous" / "readiness.json").write_text(json.dumps(document))
    machine = ("--triton-threshold=regression_capacity_drop_max=0.35", "--triton-threshold=regression_p50_rise_max=1.0",
               "--triton-threshold=regression_p99_rise_max=1.0")
    again = run_checklist(*PERF_FILES, url="own", args=(*PERF_SELECT, *machine, f"--triton-config={QUICK}",
                                                        f"--triton-baseline={runs}"))
    assert again.report["baseline"]["path"] == str(runs / "previous" / "readiness.json")
    perf5 = again.result("test_no_regression_against_baseline")
    assert perf5["verdict"] == "pass", [f["message"] for f in perf5["findings"]]
    print(*(f["message"] for f in perf5["findings"]), sep="\n")


def first_screen(browser, html: Path, name: str) -> None:
    """The verdict and the key numbers (with deltas) fit the first 1280 x 900 screen; keep a screenshot."""
    if browser is None:
        pytest.skip("the browser check needs chromium and chromium-driver")
    from selenium.webdriver.common.by import By

    browser.set_window_size(1280, 900)
    browser.get(html.resolve().as_uri())
    table = browser.find_element(By.ID, "key-table")
    assert browser.find_element(By.CSS_SELECTOR, "#verdict .verdict-word").text
    viewport = browser.execute_script("return window.innerHeight")
    assert table.location["y"] + 60 < viewport, "the key numbers are not on the first screen"
    assert table.find_elements(By.CSS_SELECTOR, "span.delta.worse"), "the capacity drop is not marked"
    assert browser.get_log("browser") == []
    assert_no_horizontal_scroll(browser)
    assert browser.save_screenshot(str(artifact_dir() / name))


def test_streaming_models_have_ttft_itl_and_token_capacity_key_numbers():
    def m(name, value, unit, model="generate"):
        return {"name": name, "value": value, "unit": unit, "model": model}

    def run(ttft, tokens):
        return {"results": [
            {"check_id": "PERF-1", "measurements": [m("TTFT p99", ttft, "ms"), m("ITL p99", 7.5, "ms"),
                                                   m("TTFT p50", 20.0, "ms"), m("success rate", 0.999, "ratio")]},
            {"check_id": "PERF-2", "measurements": [m("max output tokens/s within TTFT SLO", tokens, "tokens/s"),
                                                   m("output tokens/s at concurrency 4", tokens, "tokens/s")]}]}

    numbers = key_numbers(run(31.0, 1150.0))
    assert numbers["generate"] == {"ttft_p99": 31.0, "itl_p99": 7.5, "tokens_capacity": 1150.0, "error_rate": 0.001}
    comparisons = {c.metric.key: c for c in compare(numbers, key_numbers(run(20.0, 1600.0)), _threshold)}
    assert comparisons["ttft_p99"].status == REGRESSION and comparisons["tokens_capacity"].status == REGRESSION
    assert comparisons["itl_p99"].status == "ok"
    assert round(comparisons["ttft_p99"].noise, 4) == 0.1414  # no spread recorded: regression_noise_default
    same = compare(numbers, key_numbers(run(30.0, 1160.0)), _threshold)
    assert {c.status for c in same} <= {"ok", "improved"}


def test_the_key_number_table_shows_streaming_columns_only_where_measured():
    from pytest_triton_ready.report.summary import key_number_table

    headings, rows = key_number_table({"key_numbers": {"generate": {"ttft_p99": 31.0, "tokens_capacity": 1150.0}}})
    assert headings == ["TTFT p99 at target load (ms)", "output tokens/s within TTFT SLO (tokens/s)"]
    assert [(model, [c.text for c in cells]) for model, cells in rows] == [("generate", ["31", "1150"])]
