"""MON-2 "alert rules valid and can fire" on a deployment: the rule files' static audit
(alerting.py) against this server's metrics, then each alert's expression evaluated by a real
Prometheus on loopback scraping the server (checks/test_monitoring.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..server.metrics import MetricsSnapshot
from . import alerting
from .config import MonitoringSettings
from .prometheus import PrometheusError, PrometheusRunner, find_prometheus
from .references import live_gpu_state, live_names
from .rule_files import find_promtool
from .traffic import serve_every_model_once

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder
    from ..server.under_test import ServerUnderTest

MISSING_METRICS_FIX = ("Use metric names Triton exports (see docs/monitoring.md): latency quantiles come from "
                       "nv_inference_*_summary_us, GPU memory from nv_gpu_memory_used_bytes / "
                       "nv_gpu_memory_total_bytes.")


def prometheus_missing_reason(configured: str | None) -> str:
    """Why the alerts were not evaluated live where no prometheus binary is found."""
    where = (f"monitoring.prometheus {configured} does not exist" if configured else
             "the prometheus binary is not on PATH (apt-get install prometheus, or set monitoring.prometheus)")
    return f"{where}: the alerts were not evaluated in Prometheus"


def audit_rule_files(check: CheckRecorder, monitoring: MonitoringSettings, snapshot: MetricsSnapshot,
                     gpu: Any) -> alerting.RuleAudit:
    """Syntax (promtool, else the PromQL parser), referenced metrics against this scrape, `for` and
    severity on each alert, and layer coverage; each problem recorded as a finding."""
    promtool = find_promtool(monitoring.promtool)
    if monitoring.promtool and promtool is None:
        check.finding(f"monitoring.promtool {monitoring.promtool} does not exist: validated with promql-parser "
                      "instead", severity="warning", rule="MON-2 syntax")
    audit = alerting.read_rule_files(monitoring.alert_rules, promtool)
    alerting.judge_metrics(audit, live_names(snapshot), live_gpu_state(snapshot, gpu))
    alerting.check_alert_hygiene(audit)
    missing_layers = alerting.check_coverage(audit)
    check.evidence("validated with", "\n".join(f"{f.path}: {f.validator}" for f in audit.files) or "no readable file")
    check.measure("alerting rules", len(audit.alerts), "alerts")
    check.measure("referenced metrics missing", len(audit.missing_metrics), "metrics")
    check.measure("referenced metrics not verifiable on this server", len(audit.unverifiable_metrics), "metrics")
    check.measure("layers covered by alerts", 4 - len(missing_layers), "layers")
    for problem in audit.problems:
        check.finding(problem.message, severity=problem.severity, rule=problem.rule)
    return audit


def _not_evaluated(check: CheckRecorder, reason: str) -> None:
    """Evidence where the static audit already failed the check; else INCOMPLETE: nothing failed,
    and the alerts were not shown to fire."""
    if check.errors:
        check.evidence("not evaluated live", reason)
        return
    check.incomplete(reason)


def evaluate_live(check: CheckRecorder, target: ServerUnderTest, monitoring: MonitoringSettings,
                  audit: alerting.RuleAudit) -> list[alerting.AlertEvaluation] | None:
    """Each alert's expression evaluated by Prometheus scraping the server (every model served once
    first); None where Prometheus is missing or failed."""
    binary = find_prometheus(monitoring.prometheus)
    if binary is None:
        return _not_evaluated(check, prometheus_missing_reason(monitoring.prometheus))
    serve_every_model_once(target)
    try:
        with PrometheusRunner(binary, target.endpoints.metrics_url, audit.valid_files) as prometheus:
            prometheus.wait_until_evaluated()
            evaluations = alerting.evaluate_alerts(prometheus, audit)
            check.evidence("prometheus rule groups", "\n".join(
                f"{g['name']}: " + ", ".join(f"{r['name']}={r.get('health')}" for r in g.get("rules", []))
                for g in prometheus.rule_groups()))
    except PrometheusError as exc:
        return _not_evaluated(check, f"Prometheus on loopback could not evaluate the rules: {exc}")
    check.evidence("alert expressions evaluated by Prometheus", alerting.evaluation_table(evaluations))
    silent = [e for e in evaluations if e.status in ("no series", "query error")]
    check.measure("alerts whose expression returns no series", len(silent), "alerts")
    for problem in alerting.evaluation_problems(evaluations):
        check.finding(problem.message, severity=problem.severity, rule=problem.rule)
    return evaluations


def judge_alert_rules(check: CheckRecorder, target: ServerUnderTest, read_metrics: Callable[[], MetricsSnapshot], gpu: Any) -> None:
    """MON-2: rule files named under monitoring.alert_rules (none is an error finding), audited,
    then evaluated live."""
    monitoring = MonitoringSettings.from_settings(target.settings)
    if not monitoring.alert_rules:
        check.finding("no alert rules configured: monitoring.alert_rules names no Prometheus rule file")
        check.recommend("List your Prometheus rule files under monitoring.alert_rules "
                        "(start from examples/monitoring/alerts.yaml).")
        return
    mark = check.mark()
    audit = audit_rule_files(check, monitoring, read_metrics(), gpu)
    if evaluate_live(check, target, monitoring, audit) is None:
        return
    check.judged_since(mark, "alert-rules", measured=f"{len(audit.alerts)} alerts checked against this server's "
                       "metrics and evaluated by Prometheus")
    if audit.missing_metrics:
        check.recommend(MISSING_METRICS_FIX)
