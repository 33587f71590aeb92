"""The monitoring phase against real parts: the embedded tritonserver, a real Prometheus on loopback
(started and stopped by these tests and by MON-2 itself), promtool, and the H200 captures where a
GPU would be needed."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import psutil
import pytest
import tritonclient.grpc  # noqa: F401  imported here once: pytester's in-process runs drop the modules
import tritonclient.http  # noqa: F401  they import, and ml_dtypes (under tritonclient) cannot load twice
import yaml
from loopback_http import serving

from conftest import REPO_ROOT
from pytest_triton_ready.launchers.embedded import EmbeddedLauncher
from pytest_triton_ready.monitoring import alerting
from pytest_triton_ready.monitoring.layers import read_layers
from pytest_triton_ready.monitoring.logging_policy import judge_logging
from pytest_triton_ready.monitoring.prometheus import PrometheusRunner, find_prometheus
from pytest_triton_ready.monitoring.promql import referenced_metrics, signals
from pytest_triton_ready.monitoring.references import (
    GPU_EXPORTED,
    GPU_NOT_EXPORTED,
    LIVE,
    MISSING,
    NO_GPU,
    NOT_VERIFIABLE,
    RECORDED,
    MetricJudge,
)
from pytest_triton_ready.monitoring.rule_files import load_rule_file, validate
from pytest_triton_ready.server.metrics import MetricsSnapshot, scrape

EXAMPLES = REPO_ROOT / "examples" / "monitoring"
GUIDE_RULES = Path(__file__).resolve().parent / "data" / "monitoring" / "published_guide_alerts.yaml"
H200_CAPTURES = Path(__file__).resolve().parent / "data" / "monitoring" / "h200-triton-2.51"


def _h200(name: str) -> str:
    return (H200_CAPTURES / name).read_text()


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    """The real prometheus binary; the tests that need it skip, saying so, where it is absent."""
    binary = find_prometheus()
    if binary is None:
        pytest.skip("the prometheus binary is not installed (apt-get install prometheus)")
    return binary


@pytest.fixture(scope="module")
def production_server():
    """A tritonserver configured as production wants its logs: ISO8601 format, verbose 0."""
    launcher = EmbeddedLauncher(extra_args=["--log-format=ISO8601"])
    launcher.start()
    yield launcher
    launcher.cleanup()


def _server_args(launcher) -> tuple[str, ...]:
    e = launcher.endpoints
    return (f"--triton-url={e.http_url}", f"--triton-grpc-url={e.grpc_url}", f"--triton-metrics-url={e.metrics_url}")


def _config(tmp_path: Path, **monitoring) -> str:
    path = tmp_path / "triton-ready.yaml"
    path.write_text(yaml.safe_dump({"monitoring": monitoring}))
    return f"--triton-config={path}"


def _messages(result: dict, severity: str | None = None) -> list[str]:
    return [f["message"] for f in result["findings"] if severity is None or f["severity"] == severity]


def _measured(result: dict, name: str):
    return next(m["value"] for m in result["measurements"] if m["name"] == name)


def _own_prometheus_processes() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if p.name() == "prometheus"]


# -- the shipped examples pass, and the report shows the four layers ---------------------------
def test_examples_pass_mon1_to_mon4_on_a_production_configured_server(run_checklist, production_server,
                                                                       prometheus_binary):
    run = run_checklist("test_monitoring.py", url=None, args=(
        *_server_args(production_server), f"--triton-config={EXAMPLES / 'triton-ready.monitoring.yaml'}"))
    run.outcome.assert_outcomes(passed=5)
    assert run.report["verdict"] == "READY"

    layers = run.result("test_four_metric_layers_readable")
    table = next(e["text"] for e in layers["evidence"] if e["label"] == "four metric layers")
    for layer in ("infrastructure", "service health", "business", "cost"):
        assert _measured(layers, f"{layer}: readable values") >= 1
        assert re.search(rf"^{layer} \| .* \| [0-9.e+-]+ ", table, re.M), f"no live {layer} value in:\n{table}"
    assert _measured(layers, "service health: success rate over the probe") == 1.0
    assert _measured(layers, "infrastructure: CPU memory used") > 0
    assert "nv_energy_consumption is not exported" in table  # no GPU here, said so

    alerts = run.result("test_alert_rules_valid_and_can_fire")
    assert _measured(alerts, "alerts whose expression returns no series") == 0
    assert _measured(alerts, "layers covered by alerts") == 4
    evaluated = next(e["text"] for e in alerts["evidence"] if e["label"] == "alert expressions evaluated by Prometheus")
    for alert in ("TritonHighErrorRate", "TritonQueueTimeHigh", "TritonLatencyP99High", "TritonBatchEfficiencyLow",
                  "TritonHostMemoryHigh", "TritonComputePerInferenceHigh"):
        assert re.search(rf"^{alert} \| series \| .*-> [1-9]", evaluated, re.M), evaluated
    assert re.search(r"^TritonGpuMemoryHigh \| not verifiable", evaluated, re.M)
    warnings = _messages(alerts, "warning")
    assert any("nv_gpu_memory_used_bytes is not verifiable live" in w for w in warnings)
    assert "promtool check rules" in next(e["text"] for e in alerts["evidence"] if e["label"] == "validated with")

    dashboard = run.result("test_dashboard_covers_four_layers")
    assert _measured(dashboard, "layers covered by panels") == 4
    assert _measured(dashboard, "Prometheus queries") >= 15

    logging = run.result("test_logging_ready_for_aggregation")
    assert _measured(logging, "log format") == "ISO8601"
    assert not _own_prometheus_processes()


# -- the published guide's alerts fail, naming what exists --------------------------------------
def test_published_guide_alerts_fail_mon2_naming_the_metrics_that_exist(run_checklist, tmp_path, prometheus_binary):
    run = run_checklist("test_monitoring.py", args=(_config(tmp_path, alert_rules=[str(GUIDE_RULES)]),
                                                    "-k", "alert_rules"))
    run.outcome.assert_outcomes(failed=1)
    result = run.result("test_alert_rules_valid_and_can_fire")
    assert result["verdict"] == "fail"
    errors = _messages(result, "error")
    histogram = [e for e in errors if e.startswith("nv_inference_compute_infer_histogram_ms_bucket does not exist")]
    assert histogram and "nv_inference_compute_infer_summary_us" in histogram[0]
    used = [e for e in errors if e.startswith("gpu_used_memory does not exist")]
    assert used and "nv_gpu_memory_used_bytes (exported on servers with GPUs" in used[0]
    total = [e for e in errors if e.startswith("gpu_total_memory does not exist")]
    assert total and "nv_gpu_memory_total_bytes" in total[0]
    assert _measured(result, "referenced metrics missing") == 3
    assert any("'HighInferenceLatency'" in e and "can never fire" in e for e in errors)
    assert any("'GPUMemoryHigh'" in e and "can never fire" in e for e in errors)
    assert any("no alert watches the service health layer" in e for e in errors)


def test_broken_copy_of_the_examples_fails_with_one_finding_per_fault(run_checklist, tmp_path, prometheus_binary):
    rules = yaml.safe_load((EXAMPLES / "alerts.yaml").read_text())
    by_name = {r.get("alert"): r for g in rules["groups"] for r in g["rules"]}
    del by_name["TritonHighErrorRate"]["for"]
    del by_name["TritonQueueTimeHigh"]["labels"]["severity"]
    by_name["TritonLatencyP99High"]["expr"] = (
        'max by (model) (nv_inference_request_summary_us{quantile="0.99", model="no_such_model"}) / 1000 > 500')
    rules["groups"] = [g for g in rules["groups"] if g["name"] != "triton-cost"]
    (tmp_path / "alerts.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    (tmp_path / "typo.yaml").write_text("groups:\n  - name: typo\n    rules:\n      - alert: Broken\n"
                                        "        expr: rate(nv_inference_count[5m]\n        for: 1m\n"
                                        "        labels: {severity: warning}\n")
    run = run_checklist("test_monitoring.py", args=(
        _config(tmp_path, alert_rules=["alerts.yaml", "typo.yaml"]), "-k", "alert_rules"))
    run.outcome.assert_outcomes(failed=1)
    errors = _messages(run.result("test_alert_rules_valid_and_can_fire"), "error")
    assert any("'TritonHighErrorRate'" in e and "has no 'for'" in e for e in errors)
    assert any("'TritonQueueTimeHigh'" in e and "no severity label" in e for e in errors)
    assert any("'TritonLatencyP99High'" in e and "can never fire" in e and "no_such_model" in e for e in errors)
    assert any(e == "no alert watches the cost layer" for e in errors)
    assert any("typo.yaml" in e and "unclosed left parenthesis" in e for e in errors)
    assert len(errors) == 5, errors


def test_broken_copy_of_the_dashboard_fails_mon3(run_checklist, tmp_path):
    dashboard = json.loads((EXAMPLES / "dashboard.json").read_text())
    cost_row = next(i for i, p in enumerate(dashboard["panels"]) if p.get("title") == "Cost efficiency")
    dashboard["panels"] = dashboard["panels"][:cost_row]
    panels = {p["title"]: p for p in dashboard["panels"]}
    panels["Pending requests"]["targets"][0]["expr"] = "sum(nv_inference_pending_request_count"
    panels["Throughput per model version"]["targets"][0]["expr"] = "rate(nv_inference_count_total[5m])"
    (tmp_path / "dashboard.json").write_text(json.dumps(dashboard))
    run = run_checklist("test_monitoring.py", args=(_config(tmp_path, dashboard="dashboard.json"), "-k", "dashboard"))
    run.outcome.assert_outcomes(failed=1)
    errors = _messages(run.result("test_dashboard_covers_four_layers"), "error")
    assert any(e.startswith("panel 'Pending requests' query A is not valid PromQL") for e in errors)
    assert any(e.startswith("panel 'Throughput per model version' query A: nv_inference_count_total does not exist")
               and "nv_inference_count (on this endpoint)" in e for e in errors)
    assert "no panel shows the cost layer" in errors
    assert len(errors) == 3, errors


def test_missing_sections_fail_and_name_the_setting(run_checklist):
    run = run_checklist("test_monitoring.py", args=("-k", "alert_rules or dashboard"))
    run.outcome.assert_outcomes(failed=2)
    assert "monitoring.alert_rules" in _messages(run.result("test_alert_rules_valid_and_can_fire"))[0]
    assert "monitoring.dashboard" in _messages(run.result("test_dashboard_covers_four_layers"))[0]


def test_without_a_prometheus_binary_mon2_is_incomplete_not_passed(run_checklist, tmp_path):
    run = run_checklist("test_monitoring.py", args=(
        _config(tmp_path, alert_rules=[str(EXAMPLES / "alerts.yaml")], prometheus=str(tmp_path / "no-prometheus"),
                promtool=str(tmp_path / "no-promtool")),
        "-k", "alert_rules"))
    run.outcome.assert_outcomes(skipped=1)
    result = run.result("test_alert_rules_valid_and_can_fire")
    assert result["verdict"] == "incomplete"
    assert "does not exist: the alerts were not evaluated in Prometheus" in result["reason"]
    validated = next(e["text"] for e in result["evidence"] if e["label"] == "validated with")
    assert "promql-parser" in validated and "promtool not installed" in validated
    assert any("no-promtool does not exist" in m for m in _messages(result, "warning"))
    assert run.report["verdict"] == "INCOMPLETE"


# -- logging ------------------------------------------------------------------------------------
def test_default_log_format_fails_mon4_with_the_fix(run_checklist):
    run = run_checklist("test_monitoring.py", args=("-k", "logging"))
    run.outcome.assert_outcomes(failed=1)
    result = run.result("test_logging_ready_for_aggregation")
    assert any("log_format is 'default'" in m for m in _messages(result, "error"))
    assert "start tritonserver with --log-format=ISO8601" in result["recommendations"]


def test_verbose_and_silenced_logging_set_live_fail_mon4(run_checklist, production_server):
    from pytest_triton_ready.server.client import TritonClient

    client = TritonClient(production_server.endpoints.http_url, production_server.endpoints.grpc_url)
    original = json.loads(client.raw("/v2/logging")[1])
    try:
        status, _ = client.raw("/v2/logging", "POST", json.dumps({"log_verbose_level": 1, "log_info": False}).encode())
        assert status == 200
        run = run_checklist("test_monitoring.py", url=None, args=(*_server_args(production_server), "-k", "logging"))
    finally:
        client.raw("/v2/logging", "POST", json.dumps({k: original[k] for k in ("log_verbose_level", "log_info")}).encode())
        client.close()
    run.outcome.assert_outcomes(failed=1)
    errors = _messages(run.result("test_logging_ready_for_aggregation"), "error")
    assert any(e.startswith("log_verbose_level is 1") for e in errors)
    assert any(e.startswith("log_info is False") for e in errors)
    assert len(errors) == 2, errors


def test_a_log_file_must_be_declared_shipped():
    settings = {"log_file": "/var/log/triton.log", "log_info": True, "log_warning": True, "log_error": True,
                "log_verbose_level": 0, "log_format": "ISO8601"}
    unshipped = judge_logging(settings, {"collector": "vector", "stdout": True})
    assert [p.message for p in unshipped.problems] == [
        "the server logs to /var/log/triton.log, which monitoring.log_shipping.files does not declare shipped"]
    assert judge_logging(settings, {"collector": "vector", "files": ["/var/log/triton.log"]}).problems == []


# -- GPU metrics: real Prometheus over the H200 capture -----------------------------------------
@pytest.fixture
def h200_endpoint():
    """The H200 capture taken under load, served as a metrics endpoint on loopback."""
    with serving(_h200("metrics_load.txt").encode(), "text/plain; version=0.0.4") as url:
        yield f"{url}/metrics"


def test_gpu_alerts_evaluate_to_series_where_triton_exports_gpu_metrics(h200_endpoint, prometheus_binary, tmp_path):
    escaped = tmp_path / "escaped.yaml"  # a string escape the parser's printer does not re-escape
    escaped.write_text("groups:\n  - name: escaped\n    rules:\n      - alert: GpuByShortId\n"
                       "        expr: 'label_replace(nv_gpu_utilization, \"id\", \"$1\", \"gpu_uuid\", \"GPU-(.*)\\\\.x\") > 0'\n"
                       "        for: 1m\n        labels: {severity: info}\n")
    snapshot = scrape(h200_endpoint)
    audit = alerting.read_rule_files([EXAMPLES / "alerts.yaml", GUIDE_RULES, escaped], shutil.which("promtool"))
    assert escaped in audit.valid_files  # promtool accepts it
    alerting.judge_metrics(audit, snapshot.names | set(snapshot.types), GPU_EXPORTED)
    with PrometheusRunner(prometheus_binary, h200_endpoint, audit.valid_files) as prometheus:
        prometheus.wait_until_evaluated()
        evaluations = {e.alert.name: e for e in alerting.evaluate_alerts(prometheus, audit)}
        assert prometheus.target_health()["health"] == "up"
        process = prometheus.process
    assert process.poll() is not None and not _own_prometheus_processes()
    assert evaluations["TritonGpuMemoryHigh"].status == "series"
    assert evaluations["TritonGpuSaturated"].status == "series"
    assert evaluations["TritonEnergyPerInferenceHigh"].status == "series"
    assert evaluations["GpuByShortId"].status == "series"
    assert evaluations["GpuByShortId"].firing_now == 1
    assert "could not be rebuilt" in evaluations["GpuByShortId"].detail
    # the guide's alerts stay silent even on a GPU server: their metrics do not exist anywhere
    assert evaluations["GPUMemoryHigh"].status == "no series"
    assert evaluations["HighInferenceLatency"].status == "no series"
    assert not [r for r in audit.missing_metrics if r.name.startswith("nv_")
                and r.name != "nv_inference_compute_infer_histogram_ms_bucket"]


def test_four_layers_from_the_h200_captures():
    before, after = MetricsSnapshot.parse(_h200("metrics_load.txt")), MetricsSnapshot.parse(_h200("metrics_after.txt"))
    values = {(v.layer, v.name, v.model): v.value for v in read_layers(before, after, 10.0)}
    gpu_util = next(v for (layer, name, _), v in values.items() if name.endswith(" utilization") and "GPU" in name)
    assert gpu_util == pytest.approx(0.61)
    assert values[("business", "average batch size", "mlp:1")] == pytest.approx(3.2, abs=0.01)
    assert values[("business", "average batch size", "mlp_nobatch:1")] == 1.0
    energy = values[("cost", "energy per inference", None)]
    assert energy == pytest.approx(0.0577, rel=0.01)
    assert values[("cost", "inferences per kWh", None)] == pytest.approx(3.6e6 / energy)
    assert values[("cost", "GPU time per inference", "mlp:1")] < values[("cost", "GPU time per inference", "mlp_nobatch:1")]
    assert values[("service health", "queue time P95", "mlp_nobatch:1")] == pytest.approx(39.36)


def test_mon1_rules_without_their_data_source_are_unjudged_naming_it():
    """Issue 23 g: without summaries no queue P95 exists (the counters give a mean only), and a
    success rate the counters did not give is not skipped: each rule gets no value and names the
    source it lacked, so MON-1 ends INCOMPLETE instead of passing without them."""
    from pytest_triton_ready.monitoring.layers import (
        QUEUE_P95_SOURCE,
        LayerValue,
        RuleInput,
        queue_p95_inputs,
        success_rate_input,
    )

    def scrape_of(success, failure, queued_us):
        return MetricsSnapshot.parse(
            "# TYPE nv_inference_request_success counter\n"
            f'nv_inference_request_success{{model="scale",version="1"}} {success}\n'
            "# TYPE nv_inference_request_failure counter\n"
            f'nv_inference_request_failure{{model="scale",version="1",reason="REJECTED"}} {failure}\n'
            "# TYPE nv_inference_queue_duration_us counter\n"
            f'nv_inference_queue_duration_us{{model="scale",version="1"}} {queued_us}\n')

    moved = read_layers(scrape_of(10, 0, 1000), scrape_of(20, 0, 3000), 1.0)
    [queue] = queue_p95_inputs(moved)
    assert (queue.model, queue.value) == ("scale:1", None) and queue.missing.startswith(QUEUE_P95_SOURCE)
    assert "summary_latencies=true" in queue.missing
    assert success_rate_input(moved).value == 1.0
    still = read_layers(scrape_of(10, 0, 1000), scrape_of(10, 0, 1000), 1.0)
    rate = success_rate_input(still)
    assert rate.value is None and "did not count the probe's requests" in rate.missing
    assert queue_p95_inputs([]) and queue_p95_inputs([])[0].value is None  # no source at all: still not judged
    with_summaries = [LayerValue("service health", "queue time P95", 0.8, "ms", model="scale:1")]
    assert queue_p95_inputs(with_summaries) == [RuleInput("scale:1", 0.8)]


# -- referenced metrics: suffixes, recording rules, the GPU decision -----------------------------
def test_referenced_metric_extraction_and_existence(demo_server):
    snapshot = scrape(demo_server.endpoints.metrics_url)
    live = snapshot.names | set(snapshot.types)
    assert referenced_metrics('sum(rate(x_bucket{a="b"}[5m])) / on() group_left {__name__="y"}') == ["x_bucket", "y"]
    assert signals("a:b < 1.5 and on(model) sum by (model) (rate(c[5m])) > 50") == [
        "a:b{}", "sum by (model)(rate(c{}[5m]))"]
    judge = MetricJudge(live, {"triton:rate": ["nv_inference_count"]}, NO_GPU)
    assert judge.judge("nv_inference_request_summary_us_count").status == LIVE
    assert judge.judge("nv_inference_request_summary_us_bucket").status == MISSING  # a summary has no buckets
    assert judge.judge("triton:rate").status == RECORDED
    assert judge.judge("triton:rate").layers == {"business"}
    assert judge.judge("nv_gpu_power_usage").status == NOT_VERIFIABLE
    gpus_hidden = MetricJudge(live, {}, GPU_NOT_EXPORTED).judge("nv_gpu_power_usage")
    assert gpus_hidden.status == MISSING and GPU_NOT_EXPORTED in gpus_hidden.reason


def test_fallback_validator_without_promtool(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("groups:\n  - name: g\n    rules:\n"
                    "      - alert: Unclosed\n        expr: sum(rate(nv_inference_count[5m])\n        for: 5m\n"
                    "      - alert: BadFor\n        expr: up == 0\n        for: five minutes\n"
                    "      - record: 'bad name'\n        expr: up\n")
    checked = validate(load_rule_file(path), promtool=None)
    assert checked.validator.startswith("promql-parser")
    assert checked.problems == [
        f"{path}:4: alert 'Unclosed': could not parse expression: unclosed left parenthesis",
        f"{path}:7: alert 'BadFor': 'for' is not a duration: 'five minutes'",
        f"{path}:10: recording rule 'bad name': invalid recording rule name",
    ]
    assert validate(load_rule_file(EXAMPLES / "alerts.yaml"), promtool=None).problems == []


def test_prometheus_that_cannot_scrape_says_why_and_stops(prometheus_binary):
    from pytest_triton_ready.launchers.process import free_port
    from pytest_triton_ready.monitoring.prometheus import PrometheusError

    runner = PrometheusRunner(prometheus_binary, f"http://127.0.0.1:{free_port()}/metrics")
    with pytest.raises(PrometheusError, match="cannot scrape .*connection refused"):
        with runner:
            runner.wait_until_evaluated(timeout_s=20)
    assert not runner.workdir.exists() and not _own_prometheus_processes()


def test_layers_check_fails_when_queue_time_exceeds_its_threshold(run_checklist):
    run = run_checklist("test_monitoring.py", args=("-k", "layers_readable", "--triton-threshold", "queue_p95_max_ms=0.001"))
    run.outcome.assert_outcomes(failed=1)
    result = run.result("test_four_metric_layers_readable")
    queue = [m for m in result["measurements"] if m["name"] == "service health: queue time P95 within budget"]
    assert queue and all(m["threshold"] == 0.001 and m["threshold_source"] == "cli" for m in queue)
    assert any(m["passed"] is False for m in queue)
    assert any("queue time P95 within budget" in f for f in _messages(result, "error"))


def test_server_args_from_the_examples_reach_the_embedded_launcher():
    from pytest_triton_ready.settings import build_settings
    from pytest_triton_ready.target import make_launcher

    settings = build_settings({"triton_launch": "embedded"}, {}, environ={},
                              config_file=str(EXAMPLES / "triton-ready.monitoring.yaml"))
    launcher = make_launcher(settings)
    try:
        assert "--log-format=ISO8601" in launcher.command()
    finally:
        launcher.cleanup()


def test_dashboard_in_api_form_with_old_rows_and_a_loki_panel(tmp_path):
    from pytest_triton_ready.monitoring.dashboard import DashboardError, load_dashboard

    path = tmp_path / "api.json"
    path.write_text(json.dumps({"dashboard": {"title": "old", "rows": [{"panels": [
        {"title": "Rate", "targets": [{"refId": "A", "expr": "sum(rate(nv_inference_count{model=~\"$model\"}"
                                                             "[$__rate_interval]))"}]},
        {"title": "Logs", "datasource": {"type": "loki"}, "targets": [{"refId": "A", "expr": "{app=\"triton\"} |= \"E\""}]},
    ]}]}}))
    dashboard = load_dashboard(path)
    assert [(q.panel, q.metrics) for q in dashboard.queries] == [("Rate", ["nv_inference_count"])]
    assert dashboard.skipped == ["Logs"]
    (tmp_path / "broken.json").write_text('{"panels": [\n  {"title": "x",}\n]}')
    with pytest.raises(DashboardError, match=r"broken.json:2: not valid JSON"):
        load_dashboard(tmp_path / "broken.json")
