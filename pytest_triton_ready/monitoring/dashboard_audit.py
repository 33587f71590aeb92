"""MON-3 "dashboard covers four layers": every Prometheus panel query of the Grafana dashboard
parses, reads metrics that exist on this server (or recording rules of monitoring.alert_rules),
and the panels together cover the four layers (checks/test_monitoring.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..server.metrics import MetricsSnapshot
from .catalogue import LAYERS
from .config import MonitoringSettings
from .dashboard import Dashboard, DashboardError, load_dashboard
from .references import NOT_VERIFIABLE, MetricJudge, Reference, covered_layers, live_gpu_state, live_names
from .rule_files import RuleFileError, load_rule_file

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder
    from ..server.under_test import ServerUnderTest


@dataclass(frozen=True)
class QueryFinding:
    message: str
    rule: str
    severity: str = "error"


@dataclass
class DashboardReview:
    """What the panel queries read: each metric reference, the queries that do not parse, the
    metrics missing on this server (each named once), and the findings in query order."""

    references: list[Reference] = field(default_factory=list)
    unparsed: int = 0
    missing: set[str] = field(default_factory=set)
    findings: list[QueryFinding] = field(default_factory=list)

    @property
    def covered(self) -> set[str]:
        return covered_layers(self.references)


def recordings_of(paths: list[Path]) -> dict[str, list[str]]:
    """The recording rules of the rule files (name -> metrics read); an unreadable file is left
    out (MON-2 reports it)."""
    recordings: dict[str, list[str]] = {}
    for path in paths:
        try:
            recordings.update({r.record: r.metrics for r in load_rule_file(path).rules if r.record})
        except RuleFileError:
            continue
    return recordings


def review_queries(dashboard: Dashboard, judge: MetricJudge) -> DashboardReview:
    """Each query parsed, each metric it reads judged against this server."""
    review = DashboardReview()
    for query in dashboard.queries:
        if query.parse_error:
            review.unparsed += 1
            review.findings.append(QueryFinding(f"{query.where} is not valid PromQL: {query.parse_error}: "
                                                f"{query.expr}", "MON-3 parse"))
            continue
        for metric in query.metrics:
            reference = judge.judge(metric)
            review.references.append(reference)
            if not reference.exists and metric not in review.missing:
                review.missing.add(metric)
                review.findings.append(QueryFinding(f"{query.where}: {reference.reason}", "MON-3 metric exists"))
            elif reference.status == NOT_VERIFIABLE:
                review.findings.append(QueryFinding(f"{query.where}: {reference.reason}", "MON-3 metric exists",
                                                    "info"))
    return review


def panels_by_layer(dashboard: Dashboard, judge: MetricJudge) -> str:
    """'layer: panel, panel' for each of the four layers."""
    return "\n".join(
        f"{layer}: " + ", ".join(sorted({q.panel for q in dashboard.queries
                                         if any(layer in judge.judge(m).layers for m in q.metrics)}))
        for layer in LAYERS)


def judge_dashboard(check: CheckRecorder, target: ServerUnderTest, read_metrics: Callable[[], MetricsSnapshot], gpu: Any) -> None:
    """MON-3: a dashboard named under monitoring.dashboard (none, or one that cannot be read, is an
    error finding), with at least one Prometheus query, every query valid and on existing metrics,
    and every layer shown by some panel."""
    monitoring = MonitoringSettings.from_settings(target.settings)
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
    snapshot = read_metrics()
    judge = MetricJudge(live_names(snapshot), recordings_of(monitoring.alert_rules), live_gpu_state(snapshot, gpu))
    check.measure("panels", dashboard.panels, "panels")
    if dashboard.skipped:
        check.finding(f"queries of panels {', '.join(sorted(set(dashboard.skipped)))} use a non-Prometheus data "
                      "source and were not checked", severity="info", rule="MON-3 parse")
    check.measure("Prometheus queries", len(dashboard.queries), "queries", threshold=1, comparison=">=",
                  finding=f"{dashboard.path}: no panel has a Prometheus query")
    review = review_queries(dashboard, judge)
    for item in review.findings:
        check.finding(item.message, severity=item.severity, rule=item.rule)
    check.measure("queries that do not parse", review.unparsed, "queries")
    check.measure("referenced metrics missing", len(review.missing), "metrics")
    check.measure("layers covered by panels", len(review.covered), "layers")
    for layer in LAYERS:
        if layer not in review.covered:
            check.finding(f"no panel shows the {layer} layer", rule="MON-3 coverage")
    check.evidence("panels by layer", panels_by_layer(dashboard, judge))
