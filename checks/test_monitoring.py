"""Phase "monitoring": the metrics a production deployment is watched through exist and move."""

import json
import time

import pytest

from pytest_triton_ready.facts import MetricLayers
from pytest_triton_ready.metrics import CORE_FAMILIES, MetricsError
from pytest_triton_ready.models import ready_decoupled_models, ready_models
from pytest_triton_ready.monitoring import alerting
from pytest_triton_ready.monitoring.catalogue import INFRASTRUCTURE, LAYERS
from pytest_triton_ready.monitoring.config import MonitoringSettings
from pytest_triton_ready.monitoring.dashboard import DashboardError, load_dashboard
from pytest_triton_ready.monitoring.layers import queue_p95_inputs, read_layers, success_rate_input
from pytest_triton_ready.monitoring.logging_policy import ISO8601, judge_logging, non_iso8601_lines
from pytest_triton_ready.monitoring.prometheus import PrometheusError, PrometheusRunner, find_prometheus
from pytest_triton_ready.monitoring.references import NOT_VERIFIABLE, MetricJudge, covered_layers, gpu_state
from pytest_triton_ready.monitoring.rule_files import RuleFileError, find_promtool, load_rule_file


@pytest.mark.triton_check("MON-1")
def test_metrics_endpoint_reachable_and_moving(triton, triton_metrics, check):
    """The Prometheus endpoint answers, parses as Prometheus text, carries the core nv_inference_*
    families, and nv_inference_request_success rises after successful inferences (one at a time, up
    to MOVE_ATTEMPTS: behind a balancer only some reach the server whose metrics are read)."""
    try:
        before = triton_metrics()
    except MetricsError as exc:
        check.finding(str(exc))
        check.recommend("Start tritonserver with --allow-metrics=true and expose the metrics port (8002).")
        return
    check.measure("scrape time", round(before.scrape_s, 4), "s", threshold=check.threshold("metrics_scrape_timeout_s"))
    missing = before.missing(CORE_FAMILIES)
    check.measure("core nv_inference_* families missing", len(missing), "families", threshold=0)
    for name in missing:
        check.finding(f"metric family {name} is not exposed", value=name)
    model = next(iter(ready_models(triton)), None)
    streaming = next(iter(ready_decoupled_models(triton)), None) if model is None else None
    if model is None and streaming is None:
        check.incomplete("no READY model to move the counters with")
    if streaming is not None:  # a decoupled model answers over a gRPC stream only
        model = streaming

        def send() -> str | None:
            answer = _stream_once(triton, model, "metrics")
            if answer.final:
                return None
            return f"the streamed request meant to move the counters failed: {answer.error or 'no final response'}"
    else:
        def send() -> str | None:
            outcome = triton.client.infer(model)
            return None if outcome.ok else f"the inference meant to move the counters failed: {outcome.error}"

    rise, sent = 0, 0
    while rise < 1 and sent < MOVE_ATTEMPTS:
        failure = send()
        if failure:
            check.incomplete(failure)
        sent += 1
        rise = triton_metrics().delta(before, "nv_inference_request_success", model=model)
    check.measure("inferences sent until nv_inference_request_success rose", sent, "requests", model=model)
    check.measure("nv_inference_request_success rise", rise, "requests", model=model, threshold=1, comparison=">=",
                  finding=f"{model}: nv_inference_request_success did not rise after {sent} successful inferences")
    if rise >= 1 and sent > 1:
        check.finding(f"{model}: the counter rose only after {sent} inferences: the URL spreads requests over several "
                      "servers and the metrics endpoint shows one of them (name the replicas under fleet.replicas to "
                      "read each one's metrics)", severity="info", model=model)


MOVE_ATTEMPTS = 8  # behind a balancer, one request in N reaches the server whose metrics are read
PROBE_REQUESTS_PER_MODEL = 10


def _stream_once(triton, model, prompt):
    """One streamed request to a decoupled model (2 tokens), waited for until its final response."""
    from pytest_triton_ready.load.streaming import StreamingPlan, stream_once

    plan = StreamingPlan.from_metadata(model, triton.client.model_metadata(model), triton.client.model_config(model),
                                      declared=triton.client.declared)
    return stream_once(triton.endpoints.grpc_url, plan, prompt, 2, timeout_s=triton.settings.triton_request_timeout,
                       headers=triton.settings.headers)


def _gpu_state(snapshot, gpu) -> str:
    return gpu_state(snapshot.names | set(snapshot.types), gpus_visible=bool(gpu.read()))


@pytest.mark.triton_check("MON-1")
def test_four_metric_layers_readable(triton, triton_metrics, gpu, triton_facts, check):
    """The four metric layers (infrastructure, service health, business, cost) can each be read from
    the endpoint over a short probe; success rate >= success_rate_min and queue P95 <= queue_p95_max_ms
    (each read from the endpoint: a success rate the counters did not give, or a queue P95 without
    Triton's summaries, makes the check INCOMPLETE naming the missing source).
    The probe sends every READY model in scope real requests: unary ones, and streamed requests
    over gRPC to decoupled models. Cancelled requests (reason CANCELED) are listed, not counted as
    failures: a client that went away is not the server failing."""
    models = ready_models(triton)
    streaming = ready_decoupled_models(triton)
    if not models and not streaming:
        check.incomplete("no READY model to read the layers under traffic")
    before = triton_metrics()
    started = time.monotonic()
    for model in models:
        outcomes = [triton.client.infer(model) for _ in range(PROBE_REQUESTS_PER_MODEL)]
        failed = [o for o in outcomes if not o.ok]
        if failed:
            check.evidence(f"{model}: {len(failed)} of {len(outcomes)} probe requests failed", str(failed[0].error))
    for model in streaming:
        answers = [_stream_once(triton, model, f"probe {n}") for n in range(PROBE_REQUESTS_PER_MODEL)]
        failed = [a for a in answers if not a.final or a.error]
        if failed:
            check.evidence(f"{model}: {len(failed)} of {len(answers)} streamed probe requests failed",
                           str(failed[0].error or "no final response"))
    time.sleep(1.0)  # gauges and summaries refresh on Triton's metrics interval
    after = triton_metrics()
    version = triton.client.server_metadata().get("version", "?")
    for model in streaming:
        if (triton.client.model_config(model).get("sequence_batching") or {}).get("iterative_sequence"):
            check.finding(f"{model}: iterative sequence batching: Triton {version} counts every decode step as an "
                          "inference (nv_inference_count, nv_inference_request_success) and the end of every request "
                          "as a CANCELED failure (the sequence batcher frees the slot by cancelling a null request): "
                          "its throughput here is steps/s, and alert rules on nv_inference_request_failure must leave "
                          "reason=\"CANCELED\" out", severity="info", model=model)
    values = read_layers(before, after, time.monotonic() - started, gpu.read())
    triton_facts.publish(MetricLayers(tuple(dict(vars(v)) for v in values)))
    for value in values:
        check.measure(f"{value.layer}: {value.name}", None if value.value is None else round(value.value, 4),
                      value.unit, model=value.model)
    check.evidence("four metric layers", "\n".join(
        f"{v.layer} | {v.name}{' [' + v.model + ']' if v.model else ''} | "
        f"{'n/a' if v.value is None else f'{v.value:.4g}'} {v.unit} | {v.note}" for v in values))
    for layer in LAYERS:
        readable = [v for v in values if v.layer == layer and v.value is not None]
        check.measure(f"{layer}: readable values", len(readable), "values", threshold=1, comparison=">=",
                      finding=f"no {layer} value can be read from the metrics endpoint")
    success = success_rate_input(values)
    if success.value is None:
        check.evidence("success rate not judged", success.missing)
    check.measure("service health: success rate over the probe", None if success.value is None else
                  round(success.value, 5), "ratio", threshold=check.threshold("success_rate_min"), comparison=">=",
                  finding=f"success rate {success.value or 0:.4%} over the probe ({success.note})")
    for queue in queue_p95_inputs(values):
        if queue.value is None:
            check.evidence(f"queue time P95 not judged{' for ' + queue.model if queue.model else ''}", queue.missing)
        check.measure("service health: queue time P95 within budget", None if queue.value is None else
                      round(queue.value, 3), "ms", model=queue.model, threshold=check.threshold("queue_p95_max_ms"))
    for memory in [v for v in values if v.layer == INFRASTRUCTURE and v.name.endswith("memory used")
                   and v.name.startswith("GPU") and v.value is not None]:
        if memory.value >= check.threshold("gpu_memory_used_max_fraction").value:
            check.finding(f"{memory.name} is {memory.value:.1%}, at or above the "
                          f"{check.threshold('gpu_memory_used_max_fraction').value:.0%} warning level", severity="warning")
    low, high = (check.threshold("gpu_utilization_min").value,
                 check.threshold("gpu_utilization_max").value)
    for util in [v for v in values if v.name.endswith(" utilization") and v.name.startswith("GPU") and v.value is not None]:
        if not low <= util.value <= high:
            check.finding(f"{util.name} is {util.value:.0%} during the probe; the target under production load "
                          f"is {low:.0%}-{high:.0%} (PERF-2 measures it under load)", severity="info")


@pytest.mark.triton_check("MON-2")
def test_alert_rules_valid_and_can_fire(triton, triton_metrics, gpu, check):
    """Alert rules (monitoring.alert_rules) pass promtool, read only metrics that exist, each alert has
    a `for` and a severity label, together they cover the four layers, and each alert's expression
    returns series in a real Prometheus scraping the server."""
    monitoring = MonitoringSettings.from_settings(triton.settings)
    if not monitoring.alert_rules:
        check.finding("no alert rules configured: monitoring.alert_rules names no Prometheus rule file")
        check.recommend("List your Prometheus rule files under monitoring.alert_rules "
                        "(start from examples/monitoring/alerts.yaml).")
        return
    promtool = find_promtool(monitoring.promtool)
    if monitoring.promtool and promtool is None:
        check.finding(f"monitoring.promtool {monitoring.promtool} does not exist: validated with promql-parser "
                      "instead", severity="warning", rule="MON-2 syntax")
    mark = check.mark()
    snapshot = triton_metrics()
    audit = alerting.read_rule_files(monitoring.alert_rules, promtool)
    alerting.judge_metrics(audit, snapshot.names | set(snapshot.types), _gpu_state(snapshot, gpu))
    alerting.check_alert_hygiene(audit)
    missing_layers = alerting.check_coverage(audit)
    check.evidence("validated with", "\n".join(f"{f.path}: {f.validator}" for f in audit.files) or "no readable file")
    check.measure("alerting rules", len(audit.alerts), "alerts")
    check.measure("referenced metrics missing", len(audit.missing_metrics), "metrics")
    check.measure("referenced metrics not verifiable on this server", len(audit.unverifiable_metrics), "metrics")
    check.measure("layers covered by alerts", 4 - len(missing_layers), "layers")
    for problem in audit.problems:
        check.finding(problem.message, severity=problem.severity, rule=problem.rule)

    binary = find_prometheus(monitoring.prometheus)
    if binary is None:
        reason = (f"monitoring.prometheus {monitoring.prometheus} does not exist" if monitoring.prometheus else
                  "the prometheus binary is not on PATH (apt-get install prometheus, or set monitoring.prometheus)")
        reason += ": the alerts were not evaluated in Prometheus"
        if check.errors:
            check.evidence("not evaluated live", reason)
            return
        check.incomplete(reason)
    for model in ready_models(triton):
        triton.client.infer(model)  # summaries report NaN until a model served once
    for model in ready_decoupled_models(triton):
        _stream_once(triton, model, "before the alert rules are evaluated")
    try:
        with PrometheusRunner(binary, triton.endpoints.metrics_url, audit.valid_files) as prometheus:
            prometheus.wait_until_evaluated()
            evaluations = alerting.evaluate_alerts(prometheus, audit)
            check.evidence("prometheus rule groups", "\n".join(
                f"{g['name']}: " + ", ".join(f"{r['name']}={r.get('health')}" for r in g.get("rules", []))
                for g in prometheus.rule_groups()))
    except PrometheusError as exc:
        if check.errors:
            check.evidence("not evaluated live", str(exc))
            return
        check.incomplete(f"Prometheus on loopback could not evaluate the rules: {exc}")
    check.evidence("alert expressions evaluated by Prometheus", alerting.evaluation_table(evaluations))
    silent = [e for e in evaluations if e.status in ("no series", "query error")]
    check.measure("alerts whose expression returns no series", len(silent), "alerts")
    for problem in alerting.evaluation_problems(evaluations):
        check.finding(problem.message, severity=problem.severity, rule=problem.rule)
    check.judged_since(mark, "alert-rules", measured=f"{len(audit.alerts)} alerts checked against this server's "
                       "metrics and evaluated by Prometheus")
    if audit.missing_metrics:
        check.recommend("Use metric names Triton exports (see docs/monitoring.md): latency quantiles come from "
                        "nv_inference_*_summary_us, GPU memory from nv_gpu_memory_used_bytes / "
                        "nv_gpu_memory_total_bytes.")


@pytest.mark.triton_check("MON-3")
def test_dashboard_covers_four_layers(triton, triton_metrics, gpu, check):
    """The Grafana dashboard (monitoring.dashboard) parses, every panel query is valid PromQL reading
    metrics that exist (recording rules of monitoring.alert_rules count), and the panels together
    cover the four metric layers."""
    monitoring = MonitoringSettings.from_settings(triton.settings)
    if monitoring.dashboard is None:
        check.finding("no dashboard configured: monitoring.dashboard names no Grafana dashboard JSON")
        check.recommend("Name your Grafana dashboard under monitoring.dashboard "
                        "(start from examples/monitoring/dashboard.json).")
        return
    try:
        dashboard = load_dashboard(monitoring.dashboard)
    except DashboardError as exc:
        check.finding(str(exc))
        return
    recordings = {}
    for path in monitoring.alert_rules:
        try:
            recordings.update({r.record: r.metrics for r in load_rule_file(path).rules if r.record})
        except RuleFileError:
            pass  # MON-2 reports unreadable rule files
    snapshot = triton_metrics()
    judge = MetricJudge(snapshot.names | set(snapshot.types), recordings, _gpu_state(snapshot, gpu))
    check.measure("panels", dashboard.panels, "panels")
    if dashboard.skipped:
        check.finding(f"queries of panels {', '.join(sorted(set(dashboard.skipped)))} use a non-Prometheus data "
                      "source and were not checked", severity="info", rule="MON-3 parse")
    check.measure("Prometheus queries", len(dashboard.queries), "queries", threshold=1, comparison=">=",
                  finding=f"{dashboard.path}: no panel has a Prometheus query")
    references, unparsed, missing = [], 0, set()
    for query in dashboard.queries:
        if query.parse_error:
            unparsed += 1
            check.finding(f"{query.where} is not valid PromQL: {query.parse_error}: {query.expr}",
                          rule="MON-3 parse")
            continue
        for metric in query.metrics:
            reference = judge.judge(metric)
            references.append(reference)
            if not reference.exists and metric not in missing:
                missing.add(metric)
                check.finding(f"{query.where}: {reference.reason}", rule="MON-3 metric exists")
            elif reference.status == NOT_VERIFIABLE:
                check.finding(f"{query.where}: {reference.reason}", severity="info", rule="MON-3 metric exists")
    covered = covered_layers(references)
    check.measure("queries that do not parse", unparsed, "queries")
    check.measure("referenced metrics missing", len(missing), "metrics")
    check.measure("layers covered by panels", len(covered), "layers")
    for layer in LAYERS:
        if layer not in covered:
            check.finding(f"no panel shows the {layer} layer", rule="MON-3 coverage")
    check.evidence("panels by layer", "\n".join(
        f"{layer}: " + ", ".join(sorted({q.panel for q in dashboard.queries
                                         if any(layer in judge.judge(m).layers for m in q.metrics)}))
        for layer in LAYERS))


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
