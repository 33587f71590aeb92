"""Phase "monitoring": the metrics a production deployment is watched through exist and move."""

import json

import pytest

from pytest_triton_ready.monitoring.alert_audit import judge_alert_rules
from pytest_triton_ready.monitoring.config import MonitoringSettings
from pytest_triton_ready.monitoring.dashboard_audit import judge_dashboard
from pytest_triton_ready.monitoring.endpoint import judge_endpoint
from pytest_triton_ready.monitoring.four_layers import judge_layers, probed_layers, published
from pytest_triton_ready.monitoring.logging_policy import ISO8601, judge_logging, non_iso8601_lines


@pytest.mark.triton_check("MON-1")
def test_metrics_endpoint_reachable_and_moving(triton, triton_metrics, check):
    """The Prometheus endpoint answers, parses as Prometheus text, carries the core nv_inference_*
    families, and nv_inference_request_success rises after successful inferences (one at a time, up
    to MOVE_ATTEMPTS: behind a balancer only some reach the server whose metrics are read)."""
    judge_endpoint(check, triton, triton_metrics)


@pytest.mark.triton_check("MON-1")
def test_four_metric_layers_readable(triton, triton_metrics, gpu, triton_facts, check):
    """The four metric layers (infrastructure, service health, business, cost) can each be read from
    the endpoint over a short probe; success rate >= success_rate_min and queue P95 <= queue_p95_max_ms
    (each read from the endpoint: a success rate the counters did not give, or a queue P95 without
    Triton's summaries, makes the check INCOMPLETE naming the missing source).
    The probe sends every READY model in scope real requests: unary ones, and streamed requests
    over gRPC to decoupled models. Cancelled requests (reason CANCELED) are listed, not counted as
    failures: a client that went away is not the server failing."""
    values = probed_layers(check, triton, triton_metrics, gpu)
    triton_facts.publish(published(values))
    judge_layers(check, values)


@pytest.mark.triton_check("MON-2")
def test_alert_rules_valid_and_can_fire(triton, triton_metrics, gpu, check):
    """Alert rules (monitoring.alert_rules) pass promtool, read only metrics that exist, each alert has
    a `for` and a severity label, together they cover the four layers, and each alert's expression
    returns series in a real Prometheus scraping the server."""
    judge_alert_rules(check, triton, triton_metrics, gpu)


@pytest.mark.triton_check("MON-3")
def test_dashboard_covers_four_layers(triton, triton_metrics, gpu, check):
    """The Grafana dashboard (monitoring.dashboard) parses, every panel query is valid PromQL reading
    metrics that exist (recording rules of monitoring.alert_rules count), and the panels together
    cover the four metric layers."""
    judge_dashboard(check, triton, triton_metrics, gpu)


@pytest.mark.triton_check("MON-4")
def test_logging_ready_for_aggregation(triton, check):
    """GET /v2/logging shows production logging: verbose level 0, info/warning/error on, ISO8601
    format, and a destination that is shipped (stdout, or a file monitoring.log_shipping declares)."""
    status, body = triton.client.raw("/v2/logging")
    if status == 403:
        check.incomplete("the logging API answers 403 (restricted): pass its header with --triton-header")
    if status != 200:
        check.incomplete(f"GET /v2/logging answered HTTP {status}: {body[:200].decode(errors='replace')}")
    settings = json.loads(body)
    check.evidence("GET /v2/logging", json.dumps(settings, indent=2))
    shipping = MonitoringSettings.from_settings(triton.settings).log_shipping
    verdict = judge_logging(settings, shipping)
    check.measure("log destination", verdict.destination)
    check.measure("log format", settings.get("log_format"))
    check.measure("log verbose level", settings.get("log_verbose_level"))
    if shipping:
        check.measure("log collector", shipping.get("collector", "not named"))
    mark = check.mark()
    for problem in verdict.problems:
        check.finding(problem.message, severity=problem.severity, rule="MON-4")
        check.recommend(problem.fix)
    check.judged_since(mark, "MON-4", measured="the server's logging settings (GET /v2/logging)")
    if triton.owns_process and settings.get("log_format") == ISO8601:
        lines = triton.server_log(50).splitlines()
        stray = non_iso8601_lines(lines)
        check.measure("server log lines without an ISO8601 timestamp", len(stray), "lines")
        if stray:
            check.finding(f"{len(stray)} of the last {len(lines)} server log lines carry no ISO8601 timestamp "
                          f"(written outside Triton's logger, e.g. {stray[0].strip()[:80]!r}): the aggregator's "
                          "parser must attach or drop them", severity="warning", rule="MON-4")
        check.evidence("server log lines", "\n".join(lines[-10:]))
