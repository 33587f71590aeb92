"""Turning soak windows into a check's record (measurements, findings, charts, evidence), live or
from a journal (`result_from_journal`; report/soak_journal.py renders that as a report).

`record_soak` serves both the live check and `result_from_journal`, so a journal rebuilt after a crash
is judged by the same rules, with the same words, as the run that wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..duration import format_duration
from ..load.client_health import guard_soak
from ..record.model import Evidence, Result, Verdict
from ..record.recorder import CheckRecorder
from .journal import Journal
from .judge import MB, SoakEvaluation, evaluate
from .schedule import SoakPlan
from .windows import SoakWindow

if TYPE_CHECKING:
    from ..settings import Settings

CHECK_ID = "PERF-3"
PHASE = "performance"
MAX_MARKED_SPANS = 20
DEFAULT_TITLE = "The server stays stable under steady load for the soak duration"


def record_soak(check: CheckRecorder, plan: SoakPlan, windows: Sequence[SoakWindow], ran_s: float) -> SoakEvaluation:
    """Record the soak on `check`: the plan, every rule outcome, the charts and the window table."""
    check.setting("soak duration planned", round(plan.duration_s, 1), "s", source="triton_soak")
    check.measure("soak duration run", round(ran_s, 1), "s")
    check.setting("window length", round(plan.window_s, 2), "s")
    check.setting("warm-up (left out of drift and leak trends)", round(plan.warmup_s, 2), "s")
    check.measure("windows", len(windows), "windows")
    for model in plan.models:
        check.setting("target rate", round(plan.rates[model], 2), "infer/s", model=model,
                      source=plan.rate_sources[model])
    sent = sum(w.sent for w in windows)
    ok = sum(w.ok for w in windows)
    check.measure("requests completed", sent, "requests")
    check.measure("requests succeeded", ok, "requests")
    if ran_s > 0:
        check.measure("mean throughput", round(ok / ran_s, 2), "infer/s")
    p99s = [w.p99_ms for w in windows if w.p99_ms is not None]
    if p99s:
        check.measure("window p99 lowest", round(min(p99s), 3), "ms")
        check.measure("window p99 highest", round(max(p99s), 3), "ms")
    evaluation = guard_soak(evaluate(windows, plan.limits, plan.warmup_s), windows, plan.limits)
    for outcome in evaluation.outcomes:
        if outcome.severity == "error":
            check.measure(outcome.name, outcome.value, outcome.unit, threshold=outcome.threshold,
                          comparison=outcome.comparison, rule=outcome.rule,
                          finding=outcome.finding if outcome.passed is False else None)
            if outcome.passed is not None and outcome.threshold is None:
                check.judge(outcome.rule, outcome.passed, measured=outcome.name,
                            finding=outcome.finding or outcome.name)
        else:
            check.measure(outcome.name, outcome.value, outcome.unit, rule=outcome.rule)
            if outcome.passed is False:
                check.finding(outcome.finding or outcome.name, severity=outcome.severity, rule=outcome.rule)
    for note in evaluation.notes:
        check.finding(note, severity="info", rule="soak-trend")
    runner = [w.runner_rss_bytes for w in windows if w.runner_rss_bytes is not None]
    if runner:
        check.measure("runner RSS in the first window", round(runner[0] / MB, 1), "MB")
    _recommend(check, evaluation)
    _charts(check, windows, plan)
    check.evidence("soak windows", window_table(windows))
    check.evidence("soak journal", str(plan.journal_path))
    return evaluation


def _recommend(check: CheckRecorder, evaluation: SoakEvaluation) -> None:
    rules = {o.rule for o in evaluation.failed}
    if rules & {"success-overall", "success-window"}:
        check.recommend("Read the failing windows' errors and the server log around their times: a model that "
                        "starts failing mid-run points at exhausted resources or a dependency, not at its config.")
    if rules & {"server-memory-leak", "host-memory-leak", "gpu-memory-leak"}:
        check.recommend("Memory grows with traffic: profile the model (python backend stubs keep Python objects "
                        "alive between requests) and rerun the soak longer to confirm the slope.")
    if "p99-drift" in rules:
        check.recommend("p99 rose over the soak: look for growing queues (pending requests), memory pressure or "
                        "thermal/power throttling on the GPU; rerun at a lower rate to tell load from decay.")
    if "pending-growth" in rules:
        check.recommend("Pending requests grow: the offered rate is above capacity. Lower soak.rate or add "
                        "instances (instance_group count) until the queue stays flat.")


def _charts(check: CheckRecorder, windows: Sequence[SoakWindow], plan: SoakPlan) -> None:
    """Timelines of every window (x: seconds since the soak started, at each window's end)."""
    if not windows:
        return
    x_label = "time since start"

    def series(read) -> list[tuple[float, float]]:
        return [(w.end_s, read(w)) for w in windows if read(w) is not None]

    def chart(title: str, y_label: str, data: dict[str, list[tuple[float, float]]]) -> None:
        check.chart(title, x_label, y_label, data, kind="timeline", markers=markers)

    minimum = plan.limits["success_rate_min"].value
    failing = [w for w in windows if w.success_rate is not None and w.success_rate < minimum]
    markers: list[dict[str, Any]] = [{"x": plan.warmup_s, "label": "warm-up ends"}]
    for first, last in _runs(failing)[:MAX_MARKED_SPANS]:
        which = f"window {first.index}" if first is last else f"windows {first.index}-{last.index}"
        markers.append({"x": first.start_s, "until": last.end_s, "label": f"{which} below {minimum:.1%} success"})
    chart("Soak: latency per window", "latency (ms)",
          {"p50": series(lambda w: w.p50_ms), "p99": series(lambda w: w.p99_ms)})
    chart("Soak: throughput and failures per window", "requests per second",
          {"succeeded": series(lambda w: round(w.throughput, 3)),
           "failed": series(lambda w: round(w.failed / w.duration_s, 3) if w.duration_s else None)})
    memory = {
        "server process tree RSS": series(lambda w: _mb(w.server_rss_bytes)),
        "GPU memory used": series(lambda w: _mb(w.gpu_memory_used_bytes)),
        "runner RSS": series(lambda w: _mb(w.runner_rss_bytes)),
    }
    chart("Soak: memory per window", "MB", {k: v for k, v in memory.items() if v})
    host = series(lambda w: _mb(w.host_memory_used_bytes))
    if host:  # on its own axis: the whole host's memory would flatten the server's line
        chart("Soak: server host used memory per window", "MB", {"nv_cpu_memory_used_bytes": host})
    busy = series(lambda w: None if w.gpu_utilization is None else round(100 * w.gpu_utilization, 1))
    if busy:
        chart("Soak: GPU utilization per window", "%", {"GPU utilization (mean over GPUs)": busy})
    pending = series(lambda w: w.pending_requests)
    if pending:
        chart("Soak: pending requests at each window's end", "requests", {"pending": pending})


def _runs(windows: Sequence[SoakWindow]) -> list[tuple[SoakWindow, SoakWindow]]:
    """Consecutive windows grouped: [(first, last), ...]."""
    runs: list[tuple[SoakWindow, SoakWindow]] = []
    for window in windows:
        if runs and window.index == runs[-1][1].index + 1:
            runs[-1] = (runs[-1][0], window)
        else:
            runs.append((window, window))
    return runs


def _mb(value: float | None) -> float | None:
    return None if value is None else round(value / MB, 2)


def window_table(windows: Sequence[SoakWindow]) -> str:
    """Every window, one line each: what the journal holds, readable."""
    lines = ["window  end      sent     ok  failed  dropped  p50_ms   p99_ms  pending  server_MB  host_MB  gpu_MB  runner_MB"]
    for w in windows:
        lines.append(
            f"{w.index:>6}  {format_duration(w.end_s):>7}  {w.sent:>5}  {w.ok:>5}  {w.failed:>6}  {w.dropped:>7}  "
            f"{_f(w.p50_ms):>6}  {_f(w.p99_ms):>7}  {_f(w.pending_requests, 0):>7}  {_f(_mb(w.server_rss_bytes), 0):>9}  "
            f"{_f(_mb(w.host_memory_used_bytes), 0):>7}  {_f(_mb(w.gpu_memory_used_bytes), 0):>6}  "
            f"{_f(_mb(w.runner_rss_bytes), 0):>9}"
        )
    return "\n".join(lines)


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# -- a journal judged again ---------------------------------------------------------------------
def result_from_journal(journal: Journal) -> Result:
    """PERF-3's Result rebuilt from a journal; INCOMPLETE unless the journal records a completed soak."""
    header = journal.header
    identity = header.get("check") or {}
    result = Result(identity.get("check_id", CHECK_ID), identity.get("phase", PHASE),
                    identity.get("title", DEFAULT_TITLE), identity.get("nodeid", "checks/test_soak.py"))
    plan = SoakPlan.from_dict(header["plan"])
    windows = journal.windows
    ran_s = windows[-1].end_s if windows else 0.0
    check = CheckRecorder(result)
    if journal.damaged_lines:
        check.evidence("journal lines that did not parse", ", ".join(map(str, journal.damaged_lines)))
    end = journal.end or {}
    reason = end.get("reason")
    evaluation = record_soak(check, plan, windows, ran_s)
    if reason == "completed" and evaluation.open_rules and not check.failed:
        result.verdict = Verdict.INCOMPLETE
        result.reason = "; ".join(evaluation.open_rules)
    elif reason == "completed":
        result.verdict = Verdict.FAIL if check.failed else Verdict.PASS
    else:
        result.verdict = Verdict.INCOMPLETE
        how = {"interrupted": "was interrupted", None: "stopped without closing its journal (the runner was killed "
               "or the host went down)"}.get(reason, f"ended with an error: {end.get('error', reason)}")
        failing = sorted({f.rule for f in check.errors if f.rule})
        result.reason = (f"the soak {how} after {format_duration(ran_s)} of {format_duration(plan.duration_s)}; "
                         f"{len(windows)} windows kept" + (f"; already failing: {', '.join(failing)}" if failing else ""))
    result.duration_s = ran_s
    result.evidence.insert(0, Evidence("rendered from soak journal", str(journal.path)))
    return result


def journal_header(check_result: Result, plan: SoakPlan, context: dict[str, Any], settings: Settings,
                   started_at: str) -> dict[str, Any]:
    """What a journal's first line holds: enough to render a report with no other file."""
    return settings.redactor().value({
        "started_at": started_at,
        "check": {k: getattr(check_result, k) for k in ("check_id", "phase", "title", "nodeid")},
        "plan": plan.to_dict(),
        "context": context,
        "settings": settings.redacted(),
    })


__all__ = ["record_soak", "result_from_journal", "journal_header", "window_table"]
