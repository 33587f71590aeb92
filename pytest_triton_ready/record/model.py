"""The result model: what one check recorded. The single source of every report format."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = "1.3"

# The one phase list: (phase, check-id prefix), in the report's order.
PHASE_PREFIXES = (("config", "CFG"), ("performance", "PERF"), ("monitoring", "MON"), ("operations", "OPS"),
                  ("security", "SEC"))
PHASES = tuple(phase for phase, _ in PHASE_PREFIXES)
# The order the phases run in: monitoring reads live values before the performance phase loads the
# server to saturation.
RUN_ORDER = ("config", "monitoring", "performance", "operations", "security")


def phase_of(check_id: str) -> str:
    """The phase of a check id by its prefix (PERF-2 -> performance); "other" for an unknown prefix."""
    prefix = check_id.split("-")[0]
    return next((phase for phase, known in PHASE_PREFIXES if known == prefix), "other")


class Verdict(str, enum.Enum):
    """How one check ended.

    PASS and FAIL are measured outcomes. INCOMPLETE means the check could not run or its
    measurement was not valid (it blocks a READY verdict). NOT_APPLICABLE means the deployment has
    nothing for the check to look at (it does not block). ERROR means the check itself broke.
    """

    PASS = "pass"
    FAIL = "fail"
    INCOMPLETE = "incomplete"
    NOT_APPLICABLE = "not_applicable"
    ERROR = "error"


@dataclass
class MeasuredValue:
    """One measured value with its unit, and the threshold it was held against, if any."""

    name: str
    value: float | int | str | None
    unit: str = ""
    model: str | None = None
    threshold: float | int | None = None
    comparison: str | None = None  # "<=", ">=", "<", ">", "=="
    threshold_source: str | None = None  # default, ini, yaml:<file>, env:<VAR>, cli
    passed: bool | None = None


@dataclass
class RecordedJudgement:
    """One rule judged on data measured in this run: a measurement held against a named threshold,
    or an error rule evaluated on measured data. Only judgements can earn a check its PASS."""

    rule: str
    passed: bool
    model: str | None = None
    measured: str | None = None  # what the rule was judged on, in a few words


@dataclass
class Setting:
    """A configured value the check ran with (a planned duration, an offered rate): context for the
    reader, never a measurement and never a judgement."""

    name: str
    value: float | int | str | None
    unit: str = ""
    model: str | None = None
    source: str | None = None  # where the value came from (a setting's name, a threshold, a fact)


@dataclass
class Finding:
    """What is wrong, in one sentence; `rule` names the rule that found it."""

    message: str
    severity: str = "error"  # error | warning | info
    rule: str | None = None
    model: str | None = None
    value: Any = None


@dataclass
class Evidence:
    """Raw material behind a verdict: a failing request's error, a server-log excerpt."""

    label: str
    text: str


@dataclass
class Series:
    """One named line (or group of bars) of a chart: (x, y) points; x may be a category for bars."""

    name: str
    points: list[tuple[float, float]]


@dataclass
class Chart:
    """Data for one chart; the report draws it, the check only supplies numbers.

    kind: `line` (x numeric, e.g. latency percentiles or a throughput-latency curve), `bar` (x a
    category or number), `timeline` (x in seconds from the start; markers are events, and a marker
    with `until` is a span such as an outage).
    """

    title: str
    x_label: str
    y_label: str
    series: list[Series]
    kind: str = "line"  # line | bar | timeline
    markers: list[dict[str, Any]] = field(default_factory=list)  # {"x": ..., "label": ..., "until": ...}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Chart:
        series = [Series(s["name"], [tuple(p) for p in s["points"]]) for s in data.get("series", [])]
        return _known(cls, {**data, "series": series})


@dataclass
class LoadPoint:
    """One measured point of a load curve (PERF-2's throughput-latency curve): the load, what the
    client measured (latencies in ms over the same windows as the throughput) and the server's
    own time per request in each stage (us, from /v2/models/M/stats). None: not measured."""

    model: str
    concurrency: int
    throughput_infer_s: float
    p50_ms: float | None = None
    p90_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    server_queue_us: float | None = None
    server_compute_input_us: float | None = None
    server_compute_infer_us: float | None = None
    server_compute_output_us: float | None = None
    success_rate: float | None = None
    trustworthy: bool = True  # valid, and stable where no rule was judged with confidence (docs/load-engine.md)
    throughput_low: float | None = None  # the throughput's confidence interval over the point's windows
    throughput_high: float | None = None
    p99_low_ms: float | None = None  # the p99's confidence interval
    p99_high_ms: float | None = None
    confidence: float | None = None  # the intervals' level (load_confidence)


@dataclass
class Result:
    """Everything one check recorded: identity, verdict, measurements, findings, advice, evidence."""

    check_id: str
    phase: str
    title: str
    nodeid: str
    verdict: Verdict = Verdict.PASS
    blocking: bool = True
    reason: str | None = None
    measurements: list[MeasuredValue] = field(default_factory=list)
    judgements: list[RecordedJudgement] = field(default_factory=list)
    settings: list[Setting] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    recommendations: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    load_points: list[LoadPoint] = field(default_factory=list)  # a curve's points, for curves.csv
    duration_s: float = 0.0
    flaky: bool = False  # failed, then passed when rerun; the first failure is kept as evidence

    @property
    def rules_judged(self) -> int:
        """How many rules this check judged on data measured in this run."""
        return len(self.judgements)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["verdict"] = self.verdict.value
        data["rules_judged"] = self.rules_judged
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """The Result a `to_dict` produced; keys this version does not know are ignored."""
        return cls(
            check_id=data["check_id"],
            phase=data["phase"],
            title=data["title"],
            nodeid=data["nodeid"],
            verdict=Verdict(data["verdict"]),
            blocking=data.get("blocking", True),
            reason=data.get("reason"),
            measurements=[_known(MeasuredValue, m) for m in data.get("measurements", [])],
            judgements=[_known(RecordedJudgement, j) for j in data.get("judgements", [])],
            settings=[_known(Setting, s) for s in data.get("settings", [])],
            findings=[_known(Finding, f) for f in data.get("findings", [])],
            recommendations=list(data.get("recommendations", [])),
            evidence=[_known(Evidence, e) for e in data.get("evidence", [])],
            charts=[Chart.from_dict(c) for c in data.get("charts", [])],
            load_points=[_known(LoadPoint, p) for p in data.get("load_points", [])],
            duration_s=data.get("duration_s", 0.0),
            flaky=data.get("flaky", False),
        )


def _known(kind: type, data: dict[str, Any]) -> Any:
    """An instance of the dataclass `kind` from the keys of `data` it declares."""
    names = {f.name for f in dataclasses.fields(kind)}
    return kind(**{k: v for k, v in data.items() if k in names})
