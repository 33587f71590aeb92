"""The readiness report in all of its forms, from real checklist runs against real servers.

Every readiness.json is validated against the shipped JSON Schema (ChecklistRun.report does it),
the JUnit XML is parsed, and readiness.html is opened in a real headless Chromium: the verdict and
the check table must render, with no console message and no network request. Screenshots are kept
under $TRITON_READY_ARTIFACTS, else triton-ready-report/test-artifacts/ of the repository.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, TEST_REPOSITORIES, artifact_dir, assert_no_horizontal_scroll
from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY, EmbeddedLauncher
from pytest_triton_ready.record.model import Chart, Evidence, Finding, MeasuredValue, Result, Series, Verdict
from pytest_triton_ready.report import build_document, charts, overall_verdict, render_files, sources
from pytest_triton_ready.report import cli as report_cli
from pytest_triton_ready.report.document import dumps
from pytest_triton_ready.report.schema import schema_errors
from pytest_triton_ready.run import Run
from pytest_triton_ready.settings import Settings

SECRET = "tr-secret-7f3a9c"

# -- helpers ---------------------------------------------------------------------------------------
def junit_cases(junit_path: Path) -> dict[str, ET.Element]:
    return {case.get("name"): case for case in ET.parse(junit_path).getroot().iter("testcase")}


def properties(case: ET.Element) -> list[tuple[str, str]]:
    return [(p.get("name"), p.get("value")) for p in case.iter("property")]


def prop(case: ET.Element, name: str) -> str:
    values = [v for n, v in properties(case) if n == name]
    assert values, f"testcase {case.get('name')} has no property {name!r}: {properties(case)}"
    return values[0]


def terminal_lines(run) -> list[str]:
    return [line for line in run.outcome.outlines if line.strip()]


def server_args(launcher: EmbeddedLauncher) -> tuple[str, ...]:
    endpoints = launcher.endpoints
    return (f"--triton-grpc-url={endpoints.grpc_url}", f"--triton-metrics-url={endpoints.metrics_url}")


@dataclass
class Page:
    """What the browser showed for one readiness.html."""

    verdict: str
    rows: list[dict[str, str]]
    text: str
    console: list[dict]
    resources: int
    charts: list[dict]


def open_report(browser, html: Path, screenshot_name: str | None = None) -> Page:
    """Load readiness.html from disk; read what rendered; optionally keep a full-page screenshot."""
    if browser is None:
        pytest.skip("the browser check needs chromium and chromium-driver (apt-get install chromium chromium-driver)")
    from selenium.webdriver.common.by import By

    browser.get_log("browser")  # drop what an earlier page logged
    browser.get(html.resolve().as_uri())
    verdict = browser.find_element(By.CSS_SELECTOR, "#verdict .verdict-word")
    rows = [
        {"check": row.get_attribute("data-check"), "verdict": row.get_attribute("data-verdict"), "text": row.text}
        for row in browser.find_elements(By.CSS_SELECTOR, "#check-table tbody tr")
    ]
    charts_drawn = [
        {"kind": svg.get_attribute("class"), "width": svg.size["width"], "height": svg.size["height"],
         "marks": len(svg.find_elements(By.CSS_SELECTOR, "g[id*='series-'], g[id*='bar-'], g[id*='-marker'], "
                                                         "g[id*='-span'], g[id*='-reference']"))}
        for svg in browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    ]
    page = Page(verdict.text, rows, browser.find_element(By.TAG_NAME, "body").text, browser.get_log("browser"),
                browser.execute_script("return performance.getEntriesByType('resource').length"), charts_drawn)
    assert_no_horizontal_scroll(browser)
    if screenshot_name:
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1280, min(int(height) + 40, 8000))
        target = artifact_dir() / screenshot_name
        assert browser.save_screenshot(str(target)), "Chromium could not take a screenshot"
        browser.set_window_size(1280, 900)
        print(f"screenshot: {target} ({target.stat().st_size} bytes)")
    return page


def assert_clean(page: Page) -> None:
    assert page.console == [], f"the page logged to the console: {page.console}"
    assert page.resources == 0, "the page fetched something; it must be self-contained"


# -- a healthy run ---------------------------------------------------------------------------------
def test_healthy_demo_run_is_ready_in_every_format(run_checklist, pytester, browser, record_property):
    junit = pytester.path / "junit.xml"
    # the config phase and MON-1: what the demo server, started with default flags, is ready for
    # (MON-2..4 want alert rules, a dashboard and ISO8601 logs that a bare demo does not have)
    run = run_checklist("test_config.py", "test_monitoring.py::test_metrics_endpoint_reachable_and_moving",
                        args=(f"--junitxml={junit}", f"--triton-header=Authorization: Bearer {SECRET}",
                              "--triton-threshold=metrics_scrape_timeout_s=7",
                              f"--triton-model-repository={DEMO_REPOSITORY}"))
    report = run.report  # validated against the schema
    assert report["verdict"] == "READY"
    summary = report["summary"]
    outcomes = run.outcome.parseoutcomes()
    assert (summary["pass"], summary["not_applicable"]) == (outcomes["passed"], outcomes.get("skipped", 0))
    assert summary["total"] == summary["pass"] + summary["not_applicable"] >= 5
    assert report["verdict_reason"].startswith(f"all {summary['pass']} blocking checks passed")
    verdicts = [(r["check_id"], r["verdict"]) for r in report["results"]]
    checklist = {c["check_id"]: c for c in report["checklist"]}
    assert checklist["CFG-1"]["verdict"] == "pass" and len(checklist["CFG-1"]["nodeids"]) >= 3
    assert checklist["MON-1"]["verdict"] == "pass" and verdicts[-1] == ("MON-1", "pass")  # phase order
    context = report["context"]
    assert context["server"]["version"].startswith("2.") and "model_repository" in context["server"]["extensions"]
    assert {(m["name"], m["version"], m["state"]) for m in context["models"]} == {
        ("scale", "1", "READY"), ("cached_sum", "1", "READY"), ("accumulate", "1", "READY")}
    gpus = context["gpus"]
    assert gpus["gpus"] or gpus["unavailable_reason"], "no GPU and no reason why"
    assert context["runner"]["pytest_triton_ready"] and context["runner"]["pytest"]
    assert report["started_at"] <= report["finished_at"]
    assert report["settings"]["headers"] == {"Authorization": "***"}
    scrape = next(m for m in run.result("test_metrics_endpoint_reachable_and_moving")["measurements"]
                  if m["name"] == "scrape time")
    assert (scrape["unit"], scrape["threshold"], scrape["comparison"], scrape["threshold_source"], scrape["passed"]) == (
        "s", 7, "<=", "cli", True)
    assert report["settings"]["thresholds"] == {"metrics_scrape_timeout_s": {"value": 7, "source": "cli"}}

    files = {kind: run.report_dir / f"readiness.{kind}" for kind in ("json", "md", "html")}
    for path in [*files.values(), junit]:
        assert SECRET not in path.read_text(), f"{path.name} leaks a header value"
    sizes = {kind: path.stat().st_size for kind, path in files.items()}
    print(f"report sizes (bytes): {sizes}")
    record_property("report_sizes", json.dumps(sizes))

    markdown = files["md"].read_text()
    assert markdown.startswith("# Triton readiness: READY")
    rows = [line for line in markdown.splitlines() if line.startswith(("| ✓ |", "| – |", "| ✗ |"))]
    assert [row[2] for row in rows] == ["✓" if v == "pass" else "–" for _, v in verdicts]
    assert "## Failures" not in markdown
    assert "**GPUs**: " in markdown

    cases = junit_cases(junit)
    scrape_case = cases["test_metrics_endpoint_reachable_and_moving"]
    assert (prop(scrape_case, "check_id"), prop(scrape_case, "phase"), prop(scrape_case, "verdict")) == (
        "MON-1", "monitoring", "pass")
    assert prop(scrape_case, "measurement scrape time").endswith(" s")
    assert prop(scrape_case, "threshold scrape time") == "<= 7 s (met)"
    assert prop(scrape_case, "threshold_source scrape time") == "cli"
    latency = prop(cases["test_models_answer_inference"], "measurement scale: inference latency")
    assert latency.endswith(" ms") and float(latency.split()[0]) > 0

    lines = terminal_lines(run)
    assert any("triton-ready checklist" in line for line in lines)
    assert [line.split()[0] for line in lines if line.startswith(("CFG-", "MON-"))] == [c for c, _ in verdicts]
    assert lines[-1].startswith("triton-ready verdict: READY")

    # the report survives its run: Markdown and HTML rendered again from readiness.json are the same
    again = pytester.path / "again"
    again.mkdir()
    shutil.copy(files["json"], again / "readiness.json")
    assert report_cli.main([str(again / "readiness.json")]) == 0
    assert (again / "readiness.md").read_bytes() == files["md"].read_bytes()
    assert (again / "readiness.html").read_bytes() == files["html"].read_bytes()

    page = open_report(browser, files["html"], "readiness-healthy.png")
    assert_clean(page)
    assert page.verdict == "READY"
    assert [(r["check"], r["verdict"]) for r in page.rows] == verdicts
    assert "none visible" in page.text or "read from" in page.text
    pdf = base64.b64decode(browser.print_page())
    assert pdf.startswith(b"%PDF"), "the page does not print"
    (artifact_dir() / "readiness-healthy.pdf").write_bytes(pdf)


# -- a failing check ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def broken_server():
    """A real tritonserver on a repository where one model fails to load and one serves."""
    launcher = EmbeddedLauncher(TEST_REPOSITORIES / "broken_model")
    launcher.start()
    yield launcher
    launcher.cleanup()


def test_failing_check_is_not_ready_with_its_finding_in_every_format(run_checklist, pytester, broken_server, browser):
    junit = pytester.path / "junit.xml"
    run = run_checklist("test_config.py", url=broken_server.endpoints.http_url,
                        args=(f"--junitxml={junit}", *server_args(broken_server)))
    assert run.outcome.ret != 0
    report = run.report
    assert report["verdict"] == "NOT READY"
    assert report["verdict_reason"].startswith("blocking checks failed: CFG-1")
    failed = run.result("test_models_ready")
    assert failed["verdict"] == "fail"
    finding = next(f["message"] for f in failed["findings"] if "fails_to_load" in f["message"])
    assert "UNAVAILABLE" in finding and "weights file weights.bin is missing" in finding
    assert any(e["label"] == "fails_to_load load failure" for e in failed["evidence"])
    assert {"name": "fails_to_load", "state": "UNAVAILABLE"}.items() <= next(
        m for m in report["context"]["models"] if m["name"] == "fails_to_load").items()

    markdown = (run.report_dir / "readiness.md").read_text()
    assert markdown.startswith("# Triton readiness: NOT READY")
    failures = markdown.split("## Failures", 1)[1]
    assert "### ✗ CFG-1: Every model in scope is READY" in failures
    assert f"- {' '.join(finding.split())}" in failures
    assert any(line.startswith("| ✗ | CFG-1 |") and "fails_to_load" in line for line in markdown.splitlines())

    suite = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().find("testsuite").find("properties")}
    assert suite["triton_ready_verdict"] == "NOT READY" and suite["triton_ready_verdict_reason"] == report["verdict_reason"]
    case = junit_cases(junit)["test_models_ready"]
    assert prop(case, "verdict") == "fail"
    assert finding in [v for n, v in properties(case) if n == "finding"]
    assert finding in case.find("failure").get("message")

    lines = terminal_lines(run)
    row = next(i for i, line in enumerate(lines) if line.startswith("CFG-1") and " fail" in line
               and "fails_to_load" in lines[i + 1])
    assert lines[row + 1].startswith(" ")
    assert lines[-1].startswith("triton-ready verdict: NOT READY")

    page = open_report(browser, run.report_dir / "readiness.html", "readiness-not-ready.png")
    assert_clean(page)
    assert page.verdict == "NOT READY"
    assert ("CFG-1", "fail") in [(r["check"], r["verdict"]) for r in page.rows]
    assert finding.splitlines()[0] in page.text


# -- not applicable and incomplete -------------------------------------------------------------------
THROWAWAY_CHECKLIST = '''
import time

import numpy as np
import pytest


@pytest.mark.triton_check("CFG-9")
def test_latency_recorded(triton, check):
    """The demo models answer a short burst of requests; their latencies are charted."""
    started = time.monotonic()
    latencies = {}
    timeline = []
    for model in ("scale", "cached_sum"):
        for _ in range(12):
            outcome = triton.client.infer(model)
            assert outcome.ok, outcome.error
            latencies.setdefault(model, []).append(outcome.latency_s * 1000)
            timeline.append((time.monotonic() - started, outcome.latency_s * 1000))
    switch = timeline[12][0]
    for model, values in latencies.items():
        check.measure("p99 latency", float(np.percentile(values, 99)), "ms", model=model, threshold=10_000)
    check.chart("Latency percentiles", "percentile", "latency (ms)",
                {m: [(f"p{q}", float(np.percentile(v, q))) for q in (50, 90, 99)] for m, v in latencies.items()})
    check.chart("Request latency over the burst", "time since start", "latency (ms)", {"request": timeline},
                kind="timeline", markers=[{"x": switch, "label": "switch to cached_sum"},
                                          {"x": 0.0, "until": switch, "label": "scale"}])
    check.chart("Mean latency per model", "model", "latency (ms)",
                {"mean": [(m, float(np.mean(v))) for m, v in latencies.items()]}, kind="bar")


@pytest.mark.triton_check("GPU-9", phase="performance", blocking=False)
def test_gpu_memory_headroom(triton, check):
    """Models with GPU instances leave GPU memory headroom (advisory)."""
    on_gpu = [m for m in triton.models()
              if any(g.get("kind") == "KIND_GPU" for g in triton.client.model_config(m).get("instance_group", []))]
    if not on_gpu:
        check.not_applicable("no model in scope has KIND_GPU instances, so there is no GPU memory to check")
    check.finding(f"GPU models found, but this test does not read GPU memory: {on_gpu}")


@pytest.mark.triton_check("OPS-9", phase="operations")
def test_restart_recovers(triton, check):
    """After a server restart every model is READY again within the start-up budget."""
    if not triton.owns_process:
        check.incomplete("the server was attached by URL; restarting it needs a launcher that owns the process")
    check.finding("this test never restarts a server")
'''


def test_not_applicable_does_not_block_and_incomplete_does(run_checklist, pytester, browser):
    checklist = pytester.makepyfile(test_throwaway=THROWAWAY_CHECKLIST)
    junit = pytester.path / "junit.xml"

    waiver = pytester.path / "waive-restart.yaml"
    waiver.write_text("gate:\n  waivers:\n    - {check: OPS-9, reason: restarts are tested in staging, owner: sre, "
                      "expires: 2999-12-31}\n")
    ready = run_checklist(str(checklist), args=(f"--triton-config={waiver}",))
    ready.outcome.assert_outcomes(passed=1, skipped=1)
    report = ready.report
    assert report["verdict"] == "READY"
    assert report["verdict_reason"] == "all 1 blocking checks passed; 1 not applicable"
    assert [w["check_id"] for w in report["scope"]["waived"]] == ["OPS-9"]
    not_applicable = ready.result("test_gpu_memory_headroom")
    assert (not_applicable["verdict"], not_applicable["blocking"]) == ("not_applicable", False)
    assert "KIND_GPU" in not_applicable["reason"] and not not_applicable["findings"]

    run = run_checklist(str(checklist), args=(f"--junitxml={junit}",))
    run.outcome.assert_outcomes(passed=1, skipped=2)
    report = run.report
    assert report["verdict"] == "INCOMPLETE"
    assert report["verdict_reason"] == "blocking checks could not run or broke: OPS-9"
    incomplete = run.result("test_restart_recovers")
    assert incomplete["verdict"] == "incomplete" and "attached by URL" in incomplete["reason"]
    charted = run.result("test_latency_recorded")
    assert [c["kind"] for c in charted["charts"]] == ["line", "timeline", "bar"]

    markdown = (run.report_dir / "readiness.md").read_text()
    assert "| – | GPU-9 | performance |" in markdown and "| not applicable (advisory) |" in markdown
    assert "| – | OPS-9 | operations |" in markdown and "| incomplete |" in markdown
    assert "- – **OPS-9** After a server restart every model is READY again within the start-up budget (incomplete): " \
           "the server was attached by URL" in markdown.split("## Could not run")[1]
    assert "## Not applicable" in markdown and "## Failures" not in markdown
    assert "Checklist items: CFG-9 ✓ · GPU-9 – · OPS-9 –" in markdown

    cases = junit_cases(junit)
    for name, verdict, reason in (("test_gpu_memory_headroom", "not_applicable", "KIND_GPU"),
                                  ("test_restart_recovers", "incomplete", "attached by URL")):
        case = cases[name]
        assert prop(case, "verdict") == verdict and reason in prop(case, "reason")
        assert reason in case.find("skipped").get("message")
    assert prop(cases["test_gpu_memory_headroom"], "blocking") == "false"
    p99 = prop(cases["test_latency_recorded"], "measurement scale: p99 latency")
    assert p99.endswith(" ms")
    assert prop(cases["test_latency_recorded"], "threshold scale: p99 latency") == "<= 10000 ms (met)"

    lines = terminal_lines(run)
    gpu_row = next(i for i, line in enumerate(lines) if line.startswith("GPU-9"))
    assert "not applicable*" in lines[gpu_row] and "KIND_GPU" in lines[gpu_row + 1]
    ops_row = next(i for i, line in enumerate(lines) if line.startswith("OPS-9"))
    assert "incomplete" in lines[ops_row] and "attached by URL" in lines[ops_row + 1]
    assert lines[-1].startswith("triton-ready verdict: INCOMPLETE")

    page = open_report(browser, run.report_dir / "readiness.html", "readiness-incomplete.png")
    assert_clean(page)
    assert page.verdict == "INCOMPLETE"
    assert [(r["check"], r["verdict"]) for r in page.rows] == [
        ("CFG-9", "pass"), ("GPU-9", "not_applicable"), ("OPS-9", "incomplete")]
    assert "not applicable" in page.rows[1]["text"] and "advisory" in page.rows[1]["text"]
    assert [c["kind"] for c in page.charts] == ["chart chart-line", "chart chart-timeline", "chart chart-bar"]
    for chart in page.charts:
        assert chart["width"] > 200 and chart["height"] > 80 and chart["marks"] >= 2, chart


# -- the verdict rules -------------------------------------------------------------------------------
def _result(check_id: str, verdict: Verdict, blocking: bool = True) -> Result:
    reason = None if verdict in (Verdict.PASS, Verdict.FAIL) else "why"
    findings = [Finding("what is wrong")] if verdict == Verdict.FAIL else []
    return Result(check_id, "config", "A check", f"t.py::{check_id}", verdict, blocking, reason, findings=findings)


@pytest.mark.parametrize(("verdicts", "expected"), [
    ([("A-1", Verdict.PASS, True), ("A-2", Verdict.NOT_APPLICABLE, True)], "READY"),
    ([("A-1", Verdict.PASS, True), ("A-2", Verdict.FAIL, False)], "READY"),
    ([("A-1", Verdict.PASS, True), ("A-2", Verdict.INCOMPLETE, False)], "READY"),
    ([("A-1", Verdict.PASS, True), ("A-2", Verdict.INCOMPLETE, True)], "INCOMPLETE"),
    ([("A-1", Verdict.PASS, True), ("A-2", Verdict.ERROR, True)], "INCOMPLETE"),
    ([("A-1", Verdict.FAIL, True), ("A-2", Verdict.INCOMPLETE, True)], "NOT READY"),
])
def test_overall_verdict(verdicts, expected):
    assert overall_verdict([_result(*v) for v in verdicts]) == expected


# -- rendering without a server ----------------------------------------------------------------------
def _document(results: list[Result]) -> dict:
    run = Run(Settings(headers={"X-Api-Key": SECRET}))
    run.results = results
    run.finished_at = run.started_at
    return build_document(run)


def test_untrusted_text_is_escaped_and_secrets_redacted(tmp_path):
    hostile = f'<script>alert("x")</script> with key {SECRET}'
    result = _result("SEC-1", Verdict.FAIL)
    result.findings = [Finding(hostile)]
    result.evidence = [Evidence("server log", f"line | with pipe\n{hostile}")]
    result.measurements = [MeasuredValue("odd value", float("nan"), "ms"), MeasuredValue("numpy", np.int64(3), "requests",
                                                                                   threshold=np.float32(2.5), comparison="<=",
                                                                                   threshold_source="check",
                                                                                   passed=np.bool_(False))]
    result.charts = [Chart(f"<b>{SECRET}</b>", "x", "y", [Series("s<1>", [(0, 1.0), (1, None), (2, float("inf"))])])]
    document = _document([result])
    assert schema_errors(document) == []
    measured = document["results"][0]["measurements"]
    assert (measured[0]["value"], measured[1]["value"], measured[1]["threshold"]) == ("nan", 3, 2.5)
    written = render_files(document, tmp_path)
    (tmp_path / "readiness.json").write_text(dumps(document))
    for path in (tmp_path / "readiness.json", *written.values()):
        assert SECRET not in path.read_text(), path.name
    html = written["html"].read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b>" not in html and "&lt;b&gt;***&lt;/b&gt;" in html


def test_curve_points_are_kept_in_a_schema_valid_document_and_read_back():
    from pytest_triton_ready.performance.curve import CurvePoint
    from pytest_triton_ready.record.model import LoadPoint

    result = _result("PERF-2", Verdict.PASS)
    measured = CurvePoint(8, 1234.567, 2.0, 4.5, 1.0, True, None, 3.0, 3.5, 2.25,
                          {"queue": 300.04, "compute_input": 12.0, "compute_infer": 1400.26, "compute_output": None})
    result.load_points = [measured.for_report("scale"), LoadPoint("scale", 16, 1300.0, trustworthy=False)]
    document = _document([result])
    assert schema_errors(document) == []
    kept = document["results"][0]["load_points"]
    assert kept[0] == {"model": "scale", "concurrency": 8, "throughput_infer_s": 1234.57, "p50_ms": 2.0, "p90_ms": 3.0,
                       "p95_ms": 3.5, "p99_ms": 4.5, "mean_ms": 2.25, "server_queue_us": 300.0,
                       "server_compute_input_us": 12.0, "server_compute_infer_us": 1400.3,
                       "server_compute_output_us": None, "success_rate": 1.0, "trustworthy": True,
                       "throughput_low": None, "throughput_high": None, "p99_low_ms": None, "p99_high_ms": None,
                       "confidence": None}
    assert Result.from_dict(document["results"][0]).load_points == result.load_points
    broken = copy.deepcopy(document)
    broken["results"][0]["load_points"][1]["concurrency"] = 0
    assert [e.split(":")[0] for e in schema_errors(broken)] == ["results/0/load_points/1/concurrency"]


LONG_DIR = "/srv/ci/workspace/pytest-of-runner/pytest-1234/test_a_release_gate_against_the_staging_fleet_with_declared_faults0"


def _long_values_document() -> dict:
    """A report whose values are as long as real ones get: paths, JSON settings, digests, a model
    that failed to load with a long reason, evidence records, a dozen models of key numbers."""
    config = Result("CFG-1", "config", "Every model config parses", "checks/test_config.py::test_configs_parse",
                    Verdict.FAIL, findings=[Finding(f"{LONG_DIR}/models/ensemble_preprocessing_tokenizer/config.pbtxt:5:33: "
                                                    "'max_queue_delay_microseconds: fast': Couldn't parse integer")])
    regression = Result("PERF-5", "performance", "No regression against the baseline",
                        "checks/test_regression.py::test_no_regression_against_baseline", Verdict.PASS, measurements=[
                            MeasuredValue("baseline", f"{LONG_DIR}/runs/previous/readiness.json"),
                            MeasuredValue("model config digest", "8524c7dc59e80db3a1f0c2d4e6b8a9c1d3e5f7a9", model="scale"),
                            MeasuredValue("p99 latency", 4.9, "ms", "scale", 100.0, "<=", f"yaml:{LONG_DIR}/triton-ready.yaml",
                                        True)],
                        evidence=[Evidence("measurement", str({"count_ok": 29062, "url": f"grpc://{LONG_DIR[1:]}:8001",
                                                               "percentiles_ms": {"p50": 1.5, "p99": 4.9}})),
                                  Evidence("windows", json.dumps([{"window": i, "source": f"{LONG_DIR}/journal.jsonl"}
                                                                  for i in range(3)])),
                                  Evidence("server log", "E1130 " + "x" * 300)])
    capacity = Result("PERF-2", "performance", "Throughput-latency curve", "checks/test_performance.py::test_curve",
                      Verdict.PASS, measurements=[MeasuredValue("max throughput within SLO", 1000.0 + i, "infer/s",
                                                              f"model_{i}_with_a_rather_long_name") for i in range(12)])
    run = Run(Settings(triton_model_repository=Path(LONG_DIR) / "models", triton_soak=4.0,
                       sources={"triton_soak": f"yaml:{LONG_DIR}/triton-ready.yaml"}))
    run.results = [config, capacity, regression]
    run.finished_at = run.started_at
    run.context = {"runner": {"pytest_triton_ready": "0", "python": "3"}, "launcher": "attach",
                   "server": {"name": "triton", "version": "2.51.0", "extensions": ["model_repository"]},
                   "models": [{"name": "ensemble_preprocessing_tokenizer", "version": None, "state": "UNAVAILABLE",
                               "reason": f"load failed: {LONG_DIR}/models/ensemble_preprocessing_tokenizer/1/model.py"}],
                   "gpus": {"source": "nvml", "unavailable_reason": None, "gpus": [
                       {"index": 0, "uuid": "GPU-2ddddd50-82d1-88a5-57dc-504e56a02741", "name": "NVIDIA H200",
                        "memory_total_bytes": 150754820096, "power_limit_w": 700.0}]}}
    return build_document(run)


def test_long_values_never_widen_the_report_past_1280_px(tmp_path, browser):
    """Long paths, JSON and digests wrap inside their cells (or a too-wide table scrolls in its own
    box): no horizontal scrollbar at 1280 px, and no short word (a phase, a source) is broken."""
    document = _long_values_document()
    assert schema_errors(document) == []
    html = render_files(document, tmp_path)["html"]
    if browser is None:
        pytest.skip("the browser check needs chromium and chromium-driver")
    browser.get(html.resolve().as_uri())
    assert_no_horizontal_scroll(browser)
    broken = browser.execute_script("""
        const out = [];
        for (const cell of document.querySelectorAll('td, th')) {
          for (const node of cell.childNodes) {
            const text = node.textContent.trim();
            if (node.nodeType !== Node.TEXT_NODE || !/^[A-Za-z_]{1,14}$/.test(text)) continue;
            const range = document.createRange(); range.selectNodeContents(node);
            if (new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1) out.push(text);
          }
        }
        return out;""")
    assert broken == [], f"short words broken across lines: {broken}"
    assert browser.get_log("browser") == []
    browser.set_window_size(1280, 3000)
    assert browser.save_screenshot(str(artifact_dir() / "readiness-long-values.png"))
    browser.set_window_size(1280, 900)


def test_gpu_inventory_from_triton_metrics_of_an_h200(tmp_path):
    from pytest_triton_ready.run_context import inventory
    from pytest_triton_ready.server.gpu import readings_from_metrics
    from pytest_triton_ready.server.metrics import MetricsSnapshot

    capture = (Path(__file__).parent / "data" / "h200_gpu_metrics.txt").read_text()
    document = _document([_result("A-1", Verdict.PASS)])
    document["context"]["gpus"] = inventory("triton-metrics", readings_from_metrics(MetricsSnapshot.parse(capture)), None)
    assert schema_errors(document) == []
    assert document["context"]["gpus"]["gpus"][0]["memory_total_bytes"] == 150754820096
    html = render_files(document, tmp_path)["html"].read_text()
    gpu_cell = html.split('id="gpus"', 1)[1].split("</dd>", 1)[0]
    assert "GPU-2ddddd50-82d1-88a5-57dc-504e56a02741" in gpu_cell and "140.4 GiB" in gpu_cell and "700 W" in gpu_cell
    assert "read from triton-metrics" in gpu_cell
    markdown = (tmp_path / "readiness.md").read_text()
    assert "**GPUs**: GPU-2ddddd50-82d1-88a5-57dc-504e56a02741 (140.4 GiB), read from triton-metrics" in markdown


def test_chart_helpers_draw_any_chart_data():
    assert charts.nice_ticks(0, 9.3) == [0, 2, 4, 6, 8, 10]
    assert charts.nice_ticks(5, 5)[0] < 5 < charts.nice_ticks(5, 5)[-1]
    assert charts.format_seconds(90) == "90 s" and charts.format_seconds(3 * 3600 + 600) == "3 h 10 min"
    assert [charts.format_seconds(t) for t in charts.time_ticks(0, 24 * 3600)] == ["0 s", "6 h", "12 h", "18 h", "24 h"]
    day = Chart("soak", "time", "infer/s", [Series("throughput", [(60.0 * i, 100.0) for i in range(1440)])], kind="timeline")
    series_group = re.search(r'id="c[0-9a-f]+-series-0">(.*?)</g>', charts.render_chart(day), re.S).group(1)
    assert "<use" not in series_group  # a day of windows: the line alone, no point marks
    gap = Chart("gap", "t", "v", [Series("a", [(0, 1.0), (1, 2.0), (2, None), (3, 2.0), (4, 3.0)])])
    path = re.search(r'id="c[0-9a-f]+-series-0">\s*<path d="([^"]+)"', charts.render_chart(gap)).group(1)
    assert path.count("M") == 2  # a missing value breaks the line
    outage = Chart("outage", "t", "p99 (ms)", [Series("p99", [(t / 10, 5.0) for t in range(0, 100) if not 30 <= t < 60])],
                   kind="timeline", markers=[{"x": 3.0, "until": 6.0, "label": "server down"}])
    path = re.search(r'id="c[0-9a-f]+-series-0">\s*<path d="([^"]+)"', charts.render_chart(outage)).group(1)
    assert path.count("M") == 2  # no line drawn across the outage
    budget = Chart("curve", "concurrency", "latency (ms)", [Series("p99", [(1, 4.0), (8, 9.0)]),
                                                            Series("budget 100 ms", [(1, 100.0), (8, 100.0)])])
    assert "budget 100 ms: above the chart" in charts.render_chart(budget)  # the axis fits the data
    two_units = Chart("reload", "s", "requests per 100 ms; p99 latency in ms",
                      [Series("successes per bin", [(0, 4.0), (1, 4.0)]), Series("p99 latency (ms)", [(0, 3.0), (1, 9.0)])],
                      kind="timeline")
    svg = charts.render_chart(two_units)
    assert "p99 latency in ms" in svg and "requests per 100 ms" in svg and "(right axis)" in svg
    events_only = Chart("events", "time", "", [], kind="timeline", markers=[{"x": 5, "label": "kill"},
                                                                           {"x": 5, "until": 9, "label": "outage"}])
    svg = charts.render_chart(events_only)
    assert len(re.findall(r'id="c[0-9a-f]+-marker"', svg)) == 1 and len(re.findall(r'id="c[0-9a-f]+-span"', svg)) == 1
    assert "<script" not in svg and "href=\"http" not in svg
    bars = Chart("per model", "model", "infer/s", [Series("v1", [("a", 3.0), ("b", 4.0)]),
                                                   Series("v2", [("a", 5.0)])], kind="bar")
    assert len(re.findall(r'id="c[0-9a-f]+-bar-', charts.render_chart(bars))) == 3
    assert "no data recorded" in charts.render_chart(Chart("empty", "x", "y", [Series("s", [])]))


# -- triton-ready report: bad input and other sources -------------------------------------------------
def test_report_cli_names_the_file_and_cause_of_bad_input(tmp_path, capsys):
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("not json at all")
    other = tmp_path / "other.json"
    other.write_text('{"kind": "something-else"}')
    journal = tmp_path / "soak.jsonl"
    journal.write_text('{"window": 1, "throughput": 10}\n{"window": 2, "throughput": 11}\n')
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({**_document([_result("A-1", Verdict.PASS)]), "verdict": "MAYBE"}))
    cases = [
        (tmp_path / "missing.json", "no such file"),
        (tmp_path, "a directory without readiness.json"),
        (garbage, "not JSON"),
        (other, "kind: 'something-else'"),
        (journal, "JSON lines (2 records; first record's keys: throughput, window)"),
        (invalid, "does not match the readiness schema: verdict: 'MAYBE' is not one of"),
    ]
    for path, cause in cases:
        assert report_cli.main([str(path)]) == 2, path
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(path) in err and cause in err, err
    # the same through the installed command line
    command = subprocess.run([sys.executable, "-m", "pytest_triton_ready.cli", "report", str(garbage)],
                             capture_output=True, text=True, timeout=60)
    assert command.returncode == 2 and command.stderr.startswith(f"triton-ready report: {garbage}: not JSON")


def test_report_cli_renders_a_registered_source_and_gates_on_the_verdict(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sources, "SOURCES", list(sources.SOURCES))
    journal = tmp_path / "windows.jsonl"
    journal.write_text("".join(json.dumps({"t_s": 60 * i, "throughput": 100 + i}) + "\n" for i in range(5)))

    def load(path: Path) -> dict:
        records = [json.loads(line) for line in path.read_text().splitlines()]
        result = _result("PERF-3", Verdict.PASS)
        result.charts = [Chart("throughput", "time", "infer/s", [Series("throughput", [(r["t_s"], r["throughput"]) for r in records])],
                               kind="timeline")]
        return _document([result])

    sources.register_source(sources.ReportSource(
        "test windows", "JSON lines with t_s and throughput", lambda p: p.format == "jsonl" and "t_s" in p.first, load))
    assert report_cli.main([str(journal), "--out", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "windows.html").read_text()
    assert html.count("<svg") == 1 and "chart-timeline" in html
    assert "read as test windows" in capsys.readouterr().out

    not_ready = tmp_path / "readiness.json"
    not_ready.write_text(dumps(_document([_result("A-1", Verdict.FAIL)])))
    assert report_cli.main([str(tmp_path), "--format", "md"]) == 0
    assert (tmp_path / "readiness.md").exists() and not (tmp_path / "readiness.html").exists()
    assert report_cli.main([str(not_ready), "--fail-unless-ready"]) == 1


def test_an_unwritable_report_directory_is_refused_before_any_check_runs(pytester):
    blocker = pytester.makefile(".txt", blocker="a file where the report directory should go")
    pytester.makepyfile(test_never_runs="def test_x():\n    raise AssertionError('ran')\n")
    outcome = pytester.runpytest_subprocess(f"--readiness-report={blocker}/report", "-p", "no:cacheprovider")
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in outcome.errlines if line.strip()]
    assert errors == [f"ERROR: triton-ready: --readiness-report from cli: {blocker}/report: {blocker} is not a directory"]


def test_wheel_ships_the_schema_and_templates(tmp_path):
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO_ROOT)],
                   check=True, capture_output=True)
    names = set(zipfile.ZipFile(next(tmp_path.glob("pytest_triton_ready-*.whl"))).namelist())
    shipped = {"pytest_triton_ready/report/readiness.schema.json",
               "pytest_triton_ready/report/templates/readiness.html.j2",
               "pytest_triton_ready/report/templates/readiness.css"}
    assert shipped <= names, shipped - names


def test_a_check_title_is_the_first_sentence_of_its_docstring():
    from pytest_triton_ready.plugin.results import check_title

    assert check_title("""Every model answers with the outputs it
        declares (names, shapes). Then more detail.

        Another paragraph.""") == "Every model answers with the outputs it declares (names, shapes)"
    assert check_title("The pool is set: nv_pinned_memory_pool_total_bytes > 0 on a 2.51 server.") == \
        "The pool is set: nv_pinned_memory_pool_total_bytes > 0 on a 2.51 server"
