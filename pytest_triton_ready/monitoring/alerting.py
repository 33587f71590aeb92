"""MON-2's audit of alert rules: syntax (promtool or the PromQL parser), referenced metrics,
`for` and severity on each alert, layer coverage, and evaluation in a real Prometheus."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .catalogue import LAYERS
from .prometheus import PrometheusError, PrometheusRunner
from .promql import PromQLError, signals
from .references import NOT_VERIFIABLE, MetricJudge, Reference, covered_layers
from .rule_files import PrometheusRule, RuleFile, RuleFileError, duration_s, load_rule_file, validate


@dataclass(frozen=True)
class Problem:
    message: str
    severity: str = "error"
    rule: str = "MON-2"


@dataclass
class RuleAudit:
    files: list[RuleFile] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    references: dict[str, Reference] = field(default_factory=dict)

    @property
    def rules(self) -> list[PrometheusRule]:
        return [r for f in self.files for r in f.rules]

    @property
    def alerts(self) -> list[PrometheusRule]:
        return [r for r in self.rules if r.alert]

    @property
    def valid_files(self) -> list[Path]:
        return [f.path for f in self.files if not f.problems]

    @property
    def missing_metrics(self) -> list[Reference]:
        return [r for r in self.references.values() if not r.exists]

    @property
    def unverifiable_metrics(self) -> list[Reference]:
        return [r for r in self.references.values() if r.status == NOT_VERIFIABLE]

    def alert_layers(self) -> set[str]:
        return covered_layers([self.references[m] for a in self.alerts for m in a.metrics if m in self.references])


def read_rule_files(paths: list[Path], promtool: str | None) -> RuleAudit:
    """Load and validate every file; unreadable files become problems, not exceptions."""
    audit = RuleAudit()
    for path in paths:
        try:
            rule_file = validate(load_rule_file(path), promtool)
        except RuleFileError as exc:
            audit.problems.append(Problem(str(exc), rule="MON-2 syntax"))
            continue
        audit.files.append(rule_file)
        audit.problems += [Problem(p, rule="MON-2 syntax") for p in rule_file.problems]
    return audit


def judge_metrics(audit: RuleAudit, live_names: set[str], gpu: str) -> MetricJudge:
    """Classify every metric the rules read; one problem per missing metric, one warning per metric
    that cannot be verified on this server."""
    recordings = {r.record: r.metrics for r in audit.rules if r.record}
    judge = MetricJudge(live_names, recordings, gpu)
    users: dict[str, list[PrometheusRule]] = {}
    for rule in audit.rules:
        for metric in rule.metrics:
            users.setdefault(metric, []).append(rule)
    for metric, rules in users.items():
        reference = audit.references[metric] = judge.judge(metric)
        named = ", ".join(f"{r.kind} {r.name!r} ({r.where})" for r in rules)
        if not reference.exists:
            audit.problems.append(Problem(f"{reference.reason}; read by {named}", rule="MON-2 metric exists"))
        elif reference.status == NOT_VERIFIABLE:
            audit.problems.append(Problem(f"{reference.reason}; read by {named}", "warning", "MON-2 metric exists"))
    return judge


def check_alert_hygiene(audit: RuleAudit) -> None:
    """Each alert waits (`for` > 0) before firing and carries a severity label."""
    for alert in audit.alerts:
        if duration_s(alert.for_) <= 0:
            audit.problems.append(Problem(
                f"alert {alert.name!r} ({alert.where}) has no 'for': one bad scrape pages someone",
                rule="MON-2 for"))
        if not alert.labels.get("severity"):
            audit.problems.append(Problem(
                f"alert {alert.name!r} ({alert.where}) has no severity label: the alert router cannot route it",
                rule="MON-2 severity"))
    if audit.files and not audit.alerts:
        audit.problems.append(Problem("the rule files hold no alerting rule", rule="MON-2 coverage"))


def check_coverage(audit: RuleAudit) -> list[str]:
    """The layers no alert reads a metric of; one problem each."""
    missing = [layer for layer in LAYERS if layer not in audit.alert_layers()]
    for layer in missing:
        audit.problems.append(Problem(f"no alert watches the {layer} layer", rule="MON-2 coverage"))
    return missing


@dataclass
class AlertEvaluation:
    """One alert's expression as Prometheus evaluated it."""

    alert: PrometheusRule
    signals: dict[str, int | str]  # signal expression -> series count, or the query error
    firing_now: int | str
    status: str  # series | no series | not verifiable | query error | signal not checked
    detail: str = ""


def evaluate_alerts(prometheus: PrometheusRunner, audit: RuleAudit) -> list[AlertEvaluation]:
    """Query each alert's expression and the signals under its threshold comparisons."""
    evaluations = []
    for alert in audit.alerts:
        if alert.file not in audit.valid_files:
            continue
        try:
            parts = signals(alert.expr)
        except PromQLError as exc:
            evaluations.append(AlertEvaluation(alert, {}, 0, "query error", str(exc)))
            continue
        counts: dict[str, int | str] = {}
        for expr in parts:
            try:
                counts[expr] = len(prometheus.query(expr))
            except PrometheusError as exc:
                counts[expr] = str(exc)
        try:
            firing: int | str = len(prometheus.query(alert.expr))
        except PrometheusError as exc:
            firing = str(exc)
        unverifiable = [m for m in alert.metrics if audit.references.get(m) and
                        audit.references[m].status == NOT_VERIFIABLE]
        if isinstance(firing, str):
            evaluations.append(AlertEvaluation(alert, counts, firing, "query error", firing))
        elif any(isinstance(c, str) for c in counts.values()):
            # The rule's own text evaluates, so the rebuilt signal text is at fault (the parser's printer
            # does not re-escape strings): judge by the whole expression, and say so.
            status = "series" if firing else "signal not checked"
            evaluations.append(AlertEvaluation(alert, counts, firing, status,
                                          "its signals could not be rebuilt as text for Prometheus; "
                                          f"the whole expression returns {firing} series"))
        elif all(c > 0 for c in counts.values()):
            evaluations.append(AlertEvaluation(alert, counts, firing, "series"))
        elif unverifiable:
            evaluations.append(AlertEvaluation(alert, counts, firing, "not verifiable",
                                          f"reads {', '.join(unverifiable)}, which this server cannot export"))
        else:
            empty = [e for e, c in counts.items() if c == 0]
            evaluations.append(AlertEvaluation(alert, counts, firing, "no series", f"{' and '.join(empty)} returns nothing"))
    return evaluations


def evaluation_problems(evaluations: list[AlertEvaluation]) -> list[Problem]:
    problems = []
    for e in evaluations:
        name = f"alert {e.alert.name!r} ({e.alert.where})"
        if e.status == "no series":
            problems.append(Problem(f"{name} can never fire: {e.detail} in Prometheus scraping the server",
                                    rule="MON-2 can fire"))
        elif e.status == "query error":
            problems.append(Problem(f"{name}: Prometheus rejected the query: {e.detail}", rule="MON-2 can fire"))
        elif e.status == "signal not checked":
            problems.append(Problem(f"{name} was not fully evaluated: {e.detail}", "warning", "MON-2 can fire"))
        elif e.status == "not verifiable":
            problems.append(Problem(f"{name} was not evaluated live: {e.detail}", "warning", "MON-2 can fire"))
    return problems


def evaluation_table(evaluations: list[AlertEvaluation]) -> str:
    """A plain-text table of what Prometheus returned for each alert."""
    lines = ["alert | status | series per signal | firing now"]
    for e in evaluations:
        shown = "; ".join(f"{expr} -> {count}" for expr, count in e.signals.items())
        lines.append(f"{e.alert.name} | {e.status} | {shown} | {e.firing_now}")
    return "\n".join(lines)
