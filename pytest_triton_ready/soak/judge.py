"""The soak's verdict rules, applied to the journaled windows alone.

The check and the journal renderer both call `evaluate`, so a report rebuilt from a journal judges
exactly as the run did. Rules:

- success: at least `success_rate_min` of requests succeed overall and in every window;
- p99 drift: the median window p99 of the last quarter against the first quarter (after warm-up),
  a fail only where a rank test says the last quarter's windows are slower than the first's at
  `load_confidence`: a rise that one or two slow windows of a busy machine make is too close to
  call (INCOMPLETE, naming the test), not drift;
- leaks: the least-squares slope (MB/hour) of server memory and of GPU memory after warm-up;
- pending requests: the fitted growth of Triton's pending-request gauge over the soak, a fail only
  where the growth's interval (the slope's standard error, at `load_confidence`) lies over the
  limit too: else too close to call;
- the runner's own memory and the share of requests it could not send on time (warnings: they
  question the measurement, not the server).

A p99 rise or a pending-request growth over its limit that its test cannot tell from noise is in
`undecided`: soak evidence from another run never stands in for it, since it is this run's server.

A soak shorter than the leak-judging duration (soak_leak_min_duration_s after warm-up), or one
that could read neither the server's process memory nor the host's memory gauge, has not judged
the server's leak at all: `unjudged` names the rule and what it needs, and the soak is INCOMPLETE
(waivable) rather than a pass. Memory growth in a short soak is shown as a warning, not judged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..thresholds import THRESHOLDS, ThresholdValue
from .duration import format_duration
from .trend import Trend, fit, rise_p_value
from .windows import Window

MB = 1024 * 1024
MAX_WINDOW_FINDINGS = 5
CONFIDENCE_DEFAULT = THRESHOLDS["load_confidence"].default  # journals written before the soak read it
MIN_DRIFT_WINDOWS = 8  # two per quarter: one window's p99 alone is mostly its slowest request


@dataclass
class Outcome:
    """One measured rule outcome, ready to be recorded on a check."""

    rule: str
    name: str
    value: float | int | None
    unit: str
    threshold: ThresholdValue | None = None
    comparison: str = "<="
    passed: bool | None = None  # None: recorded for information, nothing compared
    finding: str | None = None  # the sentence shown when it misses
    severity: str = "error"  # error fails the soak; warning and info only inform
    window: int | None = None


@dataclass
class Evaluation:
    """Every outcome, plus the fitted trends the report draws."""

    outcomes: list[Outcome]
    trends: dict[str, Trend | None]
    notes: list[str]
    unjudged: list[str]  # rules that a soak of this length should have judged and could not
    undecided: list[str] = field(default_factory=list)  # rules judged on data too noisy to call

    @property
    def open_rules(self) -> list[str]:
        """Why the soak cannot pass: rules it could not judge, then rules too close to call."""
        return [*self.unjudged, *self.undecided]

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.passed is False and o.severity == "error"]


def evaluate(windows: Sequence[Window], limits: dict[str, ThresholdValue], warmup_s: float) -> Evaluation:
    """Judge the windows with the limits (named thresholds) after `warmup_s` of warm-up."""
    outcomes: list[Outcome] = []
    notes: list[str] = []
    trends: dict[str, Trend | None] = {}
    settled = [w for w in windows if w.start_s >= warmup_s - 1e-9] or list(windows[1:])
    outcomes += _success(windows, limits["success_rate_min"])
    undecided: list[str] = []
    confidence = limits["load_confidence"].value if "load_confidence" in limits else CONFIDENCE_DEFAULT
    outcomes += _drift(settled, limits["soak_p99_drift_ratio_max"], limits["soak_p99_drift_min_ms"], confidence,
                       notes, undecided)
    owns_rss = any(w.server_rss_bytes is not None for w in windows)
    memory = (
        ("server-memory-leak", "server process tree RSS", lambda w: w.server_rss_bytes,
         limits["soak_server_memory_slope_max_mb_h"], "error", "server RSS:"),
        ("host-memory-leak", "server host used memory (nv_cpu_memory_used_bytes)",
         lambda w: w.host_memory_used_bytes, limits["soak_server_memory_slope_max_mb_h"],
         "info" if owns_rss else "error", "metrics:"),
        ("gpu-memory-leak", "GPU memory used", lambda w: w.gpu_memory_used_bytes,
         limits["soak_gpu_memory_slope_max_mb_h"], "error", "GPU:"),
        ("runner-memory", "runner RSS", lambda w: w.runner_rss_bytes,
         limits["soak_runner_memory_slope_max_mb_h"], "warning", None),
    )
    for rule, label, read, limit, severity, note_prefix in memory:
        trend = fit([(w.end_s, read(w)) for w in settled], scale=1 / MB)
        trends[rule] = trend
        if trend is None:
            notes.append(_unread(label, settled, read, windows, note_prefix))
            continue
        if severity == "error" and _span_s(settled) < limits["soak_leak_min_duration_s"].value:
            severity = "warning"
            notes.append(f"{label}: {_span_s(settled):.0f} s after warm-up is shorter than soak_leak_min_duration_s "
                         f"({limits['soak_leak_min_duration_s'].value:.0f} s), too short to tell a leak from "
                         f"warm-up; memory growth is reported as a warning (run --triton-soak=30m or longer)")
        outcomes += _leak(rule, label, trend, limit, limits["soak_leak_min_growth_mb"], severity, settled, read)
    pending = fit([(w.end_s, w.pending_requests) for w in settled])
    trends["pending-growth"] = pending
    if pending is not None:
        outcomes += _pending(pending, limits["soak_pending_growth_max"], confidence, undecided)
    else:
        notes.append("pending requests: too few windows with nv_inference_pending_request_count to fit a trend")
    outcomes += _dropped(windows, limits["soak_dropped_max"])
    unjudged = []
    leak_min = limits["soak_leak_min_duration_s"].value
    long_enough = _span_s(settled) >= leak_min
    if not long_enough:
        unjudged.append(leak_unjudged(_span_s(settled), leak_min, warmup_s))
    elif trends["server-memory-leak"] is None and trends["host-memory-leak"] is None:
        unjudged.append("server memory was not read (neither the server's process tree nor the metrics' "
                        "nv_cpu_memory_used_bytes), so no leak could be judged: "
                        + "; ".join(n for n in notes if n.startswith(("server process tree", "server host")))
                        + "; give the metrics endpoint (--triton-metrics-url) or run the server from this runner")
    return Evaluation(outcomes, trends, notes, unjudged, undecided)


def leak_unjudged(span_s: float, leak_min_s: float, warmup_s: float) -> str:
    """The sentence for a soak too short to judge leaks: the rule, and the duration it needs."""
    return (f"the memory-leak rule (server-memory-leak, gpu-memory-leak) was not judged: the soak ran "
            f"{span_s:.0f} s after warm-up, and telling a leak from warm-up needs soak_leak_min_duration_s = "
            f"{leak_min_s:.0f} s (--triton-soak={math.ceil(leak_min_s + warmup_s)}s or longer, or "
            f"--triton-soak-evidence=PATH of a nightly soak)")


def _success(windows: Sequence[Window], minimum: ThresholdValue) -> list[Outcome]:
    ok = sum(w.ok for w in windows)
    completed = sum(w.completed for w in windows)
    outcomes = []
    if completed:
        rate = ok / completed
        outcomes.append(Outcome("success-overall", "success rate over the soak", round(rate, 6), "ratio", minimum,
                                ">=", rate >= minimum.value,
                                f"{completed - ok} of {completed} requests failed over the soak "
                                f"({rate:.3%} succeeded, the rule is >= {minimum.value:.3%})"))
    else:
        outcomes.append(Outcome("success-overall", "requests completed", 0, "requests", None, passed=False,
                                finding="no request completed during the soak"))
    judged = [w for w in windows if w.completed]
    failing = [w for w in judged if w.success_rate < minimum.value]
    outcomes.append(Outcome("success-window", "windows below the success minimum", len(failing), "windows", None,
                            passed=not failing, finding=None if not failing else
                            f"{len(failing)} of {len(judged)} windows fell below {minimum.value:.3%} success"))
    if judged:
        worst = min(judged, key=lambda w: (w.success_rate, w.index))
        outcomes.append(Outcome("success-window", "lowest window success rate", round(worst.success_rate, 6),
                                "ratio", minimum, ">=", worst.success_rate >= minimum.value,
                                _window_sentence(worst), window=worst.index))
    for window in failing[:MAX_WINDOW_FINDINGS]:
        if judged and window is worst:
            continue
        outcomes.append(Outcome("success-window", f"window {window.index} success rate", round(window.success_rate, 6),
                                "ratio", minimum, ">=", False, _window_sentence(window), window=window.index))
    return outcomes


def _window_sentence(window: Window) -> str:
    reason = next(iter(window.errors), None)
    where = f"window {window.index} ({format_duration(window.start_s)}-{format_duration(window.end_s)})"
    text = f"{where}: {window.failed} of {window.completed} requests failed ({window.success_rate:.2%} succeeded)"
    return text + (f"; most frequent error: {reason}" if reason else "")


def _drift(settled: Sequence[Window], ratio_max: ThresholdValue, floor: ThresholdValue, confidence: float,
           notes: list[str], undecided: list[str]) -> list[Outcome]:
    p99s = [(w.index, w.p99_ms) for w in settled if w.p99_ms is not None]
    if len(p99s) < MIN_DRIFT_WINDOWS:
        notes.append(f"p99 drift: {len(p99s)} windows after warm-up, at least {MIN_DRIFT_WINDOWS} are needed "
                     "to compare the median p99 of the first and last quarters")
        return []
    quarter = max(1, len(p99s) // 4)
    early, late = [p for _, p in p99s[:quarter]], [p for _, p in p99s[-quarter:]]
    first, last = statistics.median(early), statistics.median(late)
    ratio = last / first if first > 0 else float("inf")
    sentence = (f"p99 drifted from {first:.2f} ms (median of the first {quarter} windows after warm-up) to "
                f"{last:.2f} ms (the last {quarter})")
    name = "p99 drift (last quarter / first quarter)"
    outcomes = [Outcome("p99-drift", "p99 first quarter (median of windows)", round(first, 3), "ms"),
                Outcome("p99-drift", "p99 last quarter (median of windows)", round(last, 3), "ms")]
    if last - first <= floor.value:
        outcomes.append(Outcome("p99-drift", name, round(ratio, 3), "ratio"))
        outcomes.append(Outcome("p99-drift", "p99 rise (last quarter - first quarter)", round(last - first, 3), "ms",
                                floor, "<=", True, sentence))
        return outcomes
    p_value = rise_p_value(early, late)
    outcomes.append(Outcome("p99-drift", "p99 rise rank test p-value (last quarter slower than the first)",
                            round(p_value, 4), "p-value"))
    if ratio <= ratio_max.value or p_value <= 1 - confidence:
        outcomes.append(Outcome("p99-drift", name, round(ratio, 3), "ratio", ratio_max, "<=",
                                ratio <= ratio_max.value, f"{sentence}; a rank test finds the last quarter's "
                                f"windows slower at p={p_value:.3f}"))
        return outcomes
    outcomes.append(Outcome("p99-drift", name, round(ratio, 3), "ratio"))
    undecided.append(f"p99 drift too close to call: {sentence}, {ratio:.2f}x against the limit "
                     f"{ratio_max.value:g}x, but the two quarters' window p99s overlap (rank test p={p_value:.3f}; "
                     f"{confidence:.0%} confidence needs p <= {1 - confidence:.3f}): a few slow windows, not a "
                     "steady rise; run a longer soak (more windows) or on a quieter machine")
    return outcomes


def _pending(trend: Trend, limit: ThresholdValue, confidence: float, undecided: list[str]) -> list[Outcome]:
    """The pending-request gauge's fitted growth against its limit: over it, a fail only where the
    growth's interval at `confidence` lies above it too (a gauge read once per window jumps with
    the moment it is read); else too close to call."""
    name = "pending requests growth over the soak (fitted)"
    growth, low = trend.growth, trend.growth_low(confidence)
    sentence = f"the server's pending requests grew by {growth:.1f} over the soak (fitted over {trend.points} windows)"
    if growth <= limit.value or (low is not None and low > limit.value):
        return [Outcome("pending-growth", name, round(growth, 2), "requests", limit, "<=", growth <= limit.value,
                        f"{sentence}: requests arrive faster than they are served")]
    shown = f"{confidence:.0%} interval from {low:.1f}" if low is not None else "no interval"
    undecided.append(f"pending-request growth too close to call: {sentence}, over the limit of {limit.value:g}, "
                     f"but the windows' readings scatter ({shown}): run a longer soak or on a quieter machine")
    return [Outcome("pending-growth", name, round(growth, 2), "requests")]


def _unread(label: str, settled: Sequence[Window], read: Callable[[Window], float | None],
            windows: Sequence[Window], note_prefix: str | None) -> str:
    readable = sum(1 for w in settled if read(w) is not None)
    if readable:
        return f"{label}: {readable} readings after warm-up, too few for a trend"
    why = next((n for w in windows for n in w.notes if note_prefix and n.startswith(note_prefix)), None)
    if why is None and label.startswith("server process tree"):
        why = "the runner does not own the server process (attached), so only the host's memory gauge is read"
    return f"{label}: not read" + (f" ({why})" if why else "")


def _leak(rule: str, label: str, trend: Trend, limit: ThresholdValue, min_growth: ThresholdValue,
          severity: str, settled: Sequence[Window], read: Callable[[Window], float | None]) -> list[Outcome]:
    first, last = _first_last(settled, read)
    slope_name = f"{label} slope"
    sentence = (f"{label} grew {trend.slope_per_hour:.1f} MB/hour over {trend.points} windows "
                f"({first / MB:.0f} MB -> {last / MB:.0f} MB, fitted growth {trend.growth:.1f} MB)")
    outcomes = [Outcome(rule, f"{label} at the start (after warm-up)", round(first / MB, 1), "MB"),
                Outcome(rule, f"{label} at the end", round(last / MB, 1), "MB")]
    if severity == "info":
        outcomes.append(Outcome(rule, slope_name, round(trend.slope_per_hour, 2), "MB/h"))
        return outcomes
    if trend.growth <= min_growth.value:
        outcomes.append(Outcome(rule, slope_name, round(trend.slope_per_hour, 2), "MB/h"))
        outcomes.append(Outcome(rule, f"{label} fitted growth", round(trend.growth, 2), "MB", min_growth, "<=",
                                True, sentence, severity))
    else:
        outcomes.append(Outcome(rule, slope_name, round(trend.slope_per_hour, 2), "MB/h", limit, "<=",
                                trend.slope_per_hour <= limit.value, sentence, severity))
    return outcomes


def _span_s(windows: Sequence[Window]) -> float:
    return windows[-1].end_s - windows[0].start_s if windows else 0.0


def _first_last(windows: Sequence[Window], read: Callable[[Window], float | None]) -> tuple[float, float]:
    values = [read(w) for w in windows if read(w) is not None]
    return values[0], values[-1]


def _dropped(windows: Sequence[Window], maximum: ThresholdValue) -> list[Outcome]:
    scheduled = sum(w.sent + w.dropped for w in windows)
    if not scheduled:
        return []
    share = sum(w.dropped for w in windows) / scheduled
    return [Outcome("offered-load", "requests the runner could not send on time", round(share, 6), "ratio", maximum,
                    "<=", share <= maximum.value,
                    f"the runner could not send {share:.2%} of the scheduled requests on time: the soak applied "
                    f"less than its target rate (a busy runner host, or a rate beyond one client)", "warning")]
