"""The soak's verdict rules, applied to the journaled windows alone.

The check and the journal renderer both call `evaluate`, so a report rebuilt from a journal judges
exactly as the run did. Rules:

- success: at least `success_rate_min` of requests succeed overall, decided on the exact binomial
  (Clopper-Pearson) interval of the counts at `load_confidence` (a pass only where its bottom is at
  or above the minimum, a fail only where its top is below; otherwise too close to call, naming the
  clean requests that would decide it), and in every window (on its count: one window is short);
- p99 drift: the last quarter's window p99s (after warm-up) against what the first quarter's allow
  (each first-quarter window's p99 times `soak_p99_drift_ratio_max`, or plus
  `soak_p99_drift_min_ms`, whichever is more), by two one-sided Mann-Whitney tests (ties included)
  at `load_confidence`: a pass only where the last quarter is decidedly below, a fail only where it
  is decidedly above; otherwise too close to call, naming the test. With too few windows for the
  test to reach its level at all (`min_drift_windows`), the drift is not judged (a note);
- leaks: the least-squares slope (MB/hour) of server memory and of GPU memory after warm-up, with
  its interval at `load_confidence` (Student's t on the slope's standard error): no leak only where
  the interval's top is within the limit (or the fitted growth's top within
  `soak_leak_min_growth_mb`), a leak only where its bottom is over both;
- pending requests: the fitted growth of Triton's pending-request gauge over the soak, on the same
  interval: a pass only where its top is within the limit, a fail only where its bottom is over it;
- the runner's own memory and the share of requests it could not send on time (warnings: they
  question the measurement, not the server).

A rule whose interval holds its limit is in `undecided` with the soak length that would decide it
(a slope's interval narrows as 1 / duration^1.5) or the rule it needs: soak evidence from another
run never stands in for it, since it is this run's server.

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

from ..duration import format_duration
from ..load.confidence import Estimate, proportion_interval
from ..load.decision import FAIL, PASS, Rule, judge
from ..thresholds import THRESHOLDS, ThresholdValue
from .trend import SPAN_STEPS, Trend, fit, rank_p_value
from .windows import SoakWindow

MB = 1024 * 1024
MAX_WINDOW_FINDINGS = 5
CONFIDENCE_DEFAULT = THRESHOLDS["load_confidence"].default  # journals written before the soak read it
MIN_DRIFT_WINDOWS = 8  # two per quarter: one window's p99 alone is mostly its slowest request
P_TOLERANCE = 1e-9  # an exact p-value of 1/20 is at 0.05, not above it in floating point
DRIFT_TEST = "p99 drift rank test"


@dataclass
class RuleOutcome:
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
class SoakEvaluation:
    """Every outcome, plus the fitted trends the report draws."""

    outcomes: list[RuleOutcome]
    trends: dict[str, Trend | None]
    notes: list[str]
    unjudged: list[str]  # rules that a soak of this length should have judged and could not
    undecided: list[str] = field(default_factory=list)  # rules judged on data too noisy to call

    @property
    def open_rules(self) -> list[str]:
        """Why the soak cannot pass: rules it could not judge, then rules too close to call."""
        return [*self.unjudged, *self.undecided]

    @property
    def failed(self) -> list[RuleOutcome]:
        return [o for o in self.outcomes if o.passed is False and o.severity == "error"]


def evaluate(windows: Sequence[SoakWindow], limits: dict[str, ThresholdValue], warmup_s: float) -> SoakEvaluation:
    """Judge the windows with the limits (named thresholds) after `warmup_s` of warm-up."""
    outcomes: list[RuleOutcome] = []
    notes: list[str] = []
    trends: dict[str, Trend | None] = {}
    settled = [w for w in windows if w.start_s >= warmup_s - 1e-9] or list(windows[1:])
    undecided: list[str] = []
    confidence = limits["load_confidence"].value if "load_confidence" in limits else CONFIDENCE_DEFAULT
    outcomes += _success(windows, limits["success_rate_min"], confidence, undecided)
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
        outcomes += _leak(rule, label, trend, (limit, limits["soak_leak_min_growth_mb"]), severity, settled, read,
                          confidence, warmup_s, undecided)
    pending = fit([(w.end_s, w.pending_requests) for w in settled])
    trends["pending-growth"] = pending
    if pending is not None:
        outcomes += _pending(pending, limits["soak_pending_growth_max"], confidence, warmup_s, undecided)
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
    return SoakEvaluation(outcomes, trends, notes, unjudged, undecided)


def leak_unjudged(span_s: float, leak_min_s: float, warmup_s: float) -> str:
    """The sentence for a soak too short to judge leaks: the rule, and the duration it needs."""
    return (f"the memory-leak rule (server-memory-leak, gpu-memory-leak) was not judged: the soak ran "
            f"{span_s:.0f} s after warm-up, and telling a leak from warm-up needs soak_leak_min_duration_s = "
            f"{leak_min_s:.0f} s (--triton-soak={math.ceil(leak_min_s + warmup_s)}s or longer, or "
            f"--triton-soak-evidence=PATH of a nightly soak)")


def _success(windows: Sequence[SoakWindow], minimum: ThresholdValue, confidence: float,
             undecided: list[str]) -> list[RuleOutcome]:
    outcomes = [_success_overall(windows, minimum, confidence, undecided)]
    judged = [w for w in windows if w.completed]
    failing = [w for w in judged if w.success_rate < minimum.value]
    outcomes.append(RuleOutcome("success-window", "windows below the success minimum", len(failing), "windows", None,
                            passed=not failing, finding=None if not failing else
                            f"{len(failing)} of {len(judged)} windows fell below {minimum.value:.3%} success"))
    if judged:
        worst = min(judged, key=lambda w: (w.success_rate, w.index))
        outcomes.append(RuleOutcome("success-window", "lowest window success rate", round(worst.success_rate, 6),
                                "ratio", minimum, ">=", worst.success_rate >= minimum.value,
                                _window_sentence(worst), window=worst.index))
    for window in failing[:MAX_WINDOW_FINDINGS]:
        if judged and window is worst:
            continue
        outcomes.append(RuleOutcome("success-window", f"window {window.index} success rate", round(window.success_rate, 6),
                                "ratio", minimum, ">=", False, _window_sentence(window), window=window.index))
    return outcomes


def _success_overall(windows: Sequence[SoakWindow], minimum: ThresholdValue, confidence: float,
                     undecided: list[str]) -> RuleOutcome:
    """The soak's success rate on the interval of its counts, decided as every success rate is
    (load/decision.py `judge`): passed, failed, or too close to call (passed None, its sentence in
    `undecided`)."""
    ok, completed = sum(w.ok for w in windows), sum(w.completed for w in windows)
    if not completed:
        return RuleOutcome("success-overall", "requests completed", 0, "requests", None, passed=False,
                       finding="no request completed during the soak")
    rate, interval = ok / completed, proportion_interval(ok, completed, confidence)
    judged = judge(Rule("success rate over the soak", "success rate", ">=", minimum.value),
                   Estimate("success rate", rate, interval, len(windows), trials=completed))
    passed = {PASS: True, FAIL: False}.get(judged.outcome)
    shown = interval.describe(digits=5)
    if passed is None:
        undecided.append(f"success rate over the soak: {completed - ok} of {completed} requests failed ({rate:.3%}), "
                         f"its {shown} holds the minimum {minimum.value:g}"
                         + (f" (0 failures in {judged.needed:,} requests would show it)" if judged.needed else ""))
    return RuleOutcome("success-overall", "success rate over the soak", round(rate, 6), "ratio", minimum, ">=", passed,
                   f"{completed - ok} of {completed} requests failed over the soak ({rate:.3%} succeeded, "
                   f"{shown}; the rule is >= {minimum.value:.3%})")


def _window_sentence(window: SoakWindow) -> str:
    reason = next(iter(window.errors), None)
    where = f"window {window.index} ({format_duration(window.start_s)}-{format_duration(window.end_s)})"
    text = f"{where}: {window.failed} of {window.completed} requests failed ({window.success_rate:.2%} succeeded)"
    return text + (f"; most frequent error: {reason}" if reason else "")


def _drift(settled: Sequence[SoakWindow], ratio_max: ThresholdValue, floor: ThresholdValue, confidence: float,
           notes: list[str], undecided: list[str]) -> list[RuleOutcome]:
    """The last quarter's window p99s against the p99 each first-quarter window allows (the larger
    of `ratio_max` x it and it + `floor`), by two one-sided rank tests: within where the last
    quarter is decidedly below the allowed p99s, drift where decidedly above, else too close to call."""
    p99s = [(w.index, w.p99_ms) for w in settled if w.p99_ms is not None]
    alpha = 1 - confidence
    least = min_drift_windows(alpha)
    if len(p99s) < least:
        notes.append(f"p99 drift: {len(p99s)} windows after warm-up, at least {least} are needed "
                     f"to compare the median p99 of the first and last quarters (a rank test at {confidence:.0%} "
                     f"needs {least // 4} windows a quarter)")
        return []
    quarter = max(1, len(p99s) // 4)
    early, late = [p for _, p in p99s[:quarter]], [p for _, p in p99s[-quarter:]]
    first, last = statistics.median(early), statistics.median(late)
    ratio = last / first if first > 0 else float("inf")
    sentence = (f"p99 drifted from {first:.2f} ms (median of the first {quarter} windows after warm-up) to "
                f"{last:.2f} ms (the last {quarter})")
    allowed = [max(ratio_max.value * p, p + floor.value) for p in early]
    below, above = rank_p_value(late, allowed, "less"), rank_p_value(late, allowed, "greater")
    rule = f"{ratio_max.value:g}x the first quarter's window p99s, or +{floor.value:g} ms, whichever is more"
    outcomes = [RuleOutcome("p99-drift", "p99 first quarter (median of windows)", round(first, 3), "ms"),
                RuleOutcome("p99-drift", "p99 last quarter (median of windows)", round(last, 3), "ms"),
                RuleOutcome("p99-drift", "p99 drift (last quarter / first quarter)", round(ratio, 3), "ratio"),
                RuleOutcome("p99-drift", "p99 rise (last quarter - first quarter)", round(last - first, 3), "ms")]
    if below <= alpha + P_TOLERANCE:
        outcomes.append(RuleOutcome("p99-drift", f"{DRIFT_TEST}: the last quarter below the allowed p99 (p-value)",
                                round(below, 4), "p-value", passed=True))
    elif above <= alpha + P_TOLERANCE:
        outcomes.append(RuleOutcome("p99-drift", f"{DRIFT_TEST}: the last quarter above the allowed p99 (p-value)",
                                round(above, 4), "p-value", passed=False,
                                finding=f"{sentence}; a rank test finds the last quarter's windows above what the "
                                        f"rule allows ({rule}) at p={above:.3f}"))
    else:
        outcomes.append(RuleOutcome("p99-drift", f"{DRIFT_TEST}: the last quarter below the allowed p99 (p-value)",
                                round(below, 4), "p-value"))
        undecided.append(f"p99 drift too close to call: {sentence}, {ratio:.2f}x; the rule allows {rule}, and a rank "
                         f"test puts the last quarter's windows neither below nor above that (p={below:.3f} below, "
                         f"p={above:.3f} above; {confidence:.0%} confidence needs p <= {alpha:.3f}): decided once "
                         f"the last quarter's windows lie on one side of it; run a longer soak (each quarter held "
                         f"{quarter} windows) or on a quieter machine")
    return outcomes


def min_drift_windows(alpha: float) -> int:
    """Windows after warm-up the drift rule needs: four quarters of q, the least q at which two
    quarters wholly apart reach the rank test's p <= `alpha` (1 / C(2q, q): 3 at 0.05), and at
    least MIN_DRIFT_WINDOWS."""
    q = 1
    while 1 / math.comb(2 * q, q) > alpha + P_TOLERANCE:
        q += 1
    return max(MIN_DRIFT_WINDOWS, 4 * q)


def _pending(trend: Trend, limit: ThresholdValue, confidence: float, warmup_s: float,
             undecided: list[str]) -> list[RuleOutcome]:
    """The pending-request gauge's fitted growth against its limit, on its interval at
    `confidence` (the slope's, times the span): within where the interval's top is, growing where
    its bottom is over the limit (a gauge read once per window jumps with the moment it is read);
    else too close to call, with the soak length that would decide it."""
    name = "pending requests growth over the soak (fitted)"
    growth, low, high = trend.growth, trend.growth_low(confidence), trend.growth_high(confidence)
    sentence = f"the server's pending requests grew by {growth:.1f} over the soak (fitted over {trend.points} windows)"
    shown = f"{confidence:.0%} interval [{low:.1f}, {high:.1f}]" if low is not None else "no interval"
    if high is not None and high <= limit.value:
        return [RuleOutcome("pending-growth", name, round(growth, 2), "requests", limit, "<=", True, sentence)]
    if low is not None and low > limit.value:
        return [RuleOutcome("pending-growth", name, round(growth, 2), "requests", limit, "<=", False,
                        f"{sentence}, {shown}: requests arrive faster than they are served")]
    span_h = trend.span_to_decide(confidence, lambda lo, hi, span: hi * span <= limit.value or lo * span > limit.value)
    undecided.append(f"pending-request growth too close to call: {sentence}, {shown}, against the limit of "
                     f"{limit.value:g}: {_longer(span_h, warmup_s)}")
    return [RuleOutcome("pending-growth", name, round(growth, 2), "requests")]


def _longer(span_h: float | None, warmup_s: float) -> str:
    """What soak would decide an undecided slope, if it holds ('a soak of about 25:00 ...')."""
    if span_h is None:
        return (f"a soak up to {2 ** (SPAN_STEPS / 4):g} x as long would not decide it if the slope holds; run on a "
                "quieter machine")
    return (f"a soak of about {format_duration(span_h * 3600 + warmup_s)} would decide it if the slope holds (its "
            "interval narrows as 1 / duration^1.5)")


def _unread(label: str, settled: Sequence[SoakWindow], read: Callable[[SoakWindow], float | None],
            windows: Sequence[SoakWindow], note_prefix: str | None) -> str:
    readable = sum(1 for w in settled if read(w) is not None)
    if readable:
        return f"{label}: {readable} readings after warm-up, too few for a trend"
    why = next((n for w in windows for n in w.notes if note_prefix and n.startswith(note_prefix)), None)
    if why is None and label.startswith("server process tree"):
        why = "the runner does not own the server process (attached), so only the host's memory gauge is read"
    return f"{label}: not read" + (f" ({why})" if why else "")


def _leak(rule: str, label: str, trend: Trend, limits: tuple[ThresholdValue, ThresholdValue], severity: str,
          settled: Sequence[SoakWindow], read: Callable[[SoakWindow], float | None], confidence: float,
          warmup_s: float, undecided: list[str]) -> list[RuleOutcome]:
    """The memory slope against its limit on its interval at `confidence`: no leak where the
    interval's top is within the limit (or the fitted growth's top within the least growth that
    counts), a leak where its bottom is over both; else too close to call (an `undecided` rule
    where it is an error, information where it only warns)."""
    limit, min_growth = limits
    first, last = _first_last(settled, read)
    slope_name = f"{label} slope"
    interval = trend.slope_interval(confidence)
    shown = f"{confidence:.0%} interval [{interval[0]:.1f}, {interval[1]:.1f}] MB/h" if interval else "no interval"
    sentence = (f"{label} grew {trend.slope_per_hour:.1f} MB/hour over {trend.points} windows "
                f"({first / MB:.0f} MB -> {last / MB:.0f} MB, fitted growth {trend.growth:.1f} MB; {shown})")
    outcomes = [RuleOutcome(rule, f"{label} at the start (after warm-up)", round(first / MB, 1), "MB"),
                RuleOutcome(rule, f"{label} at the end", round(last / MB, 1), "MB")]
    slope = round(trend.slope_per_hour, 2)
    if severity == "info":
        return [*outcomes, RuleOutcome(rule, slope_name, slope, "MB/h")]
    if interval is not None:
        outcomes.append(RuleOutcome(rule, f"{slope_name} {confidence:.0%} interval high", round(interval[1], 2), "MB/h"))

    def allowed(span_h: float) -> float:
        return max(limit.value, min_growth.value / span_h)

    if interval is not None and interval[1] * trend.span_h <= min_growth.value:
        return [*outcomes, RuleOutcome(rule, slope_name, slope, "MB/h"),
                RuleOutcome(rule, f"{label} fitted growth", round(trend.growth, 2), "MB", min_growth, "<=", True, sentence,
                        severity)]
    if interval is not None and (interval[1] <= limit.value or interval[0] > allowed(trend.span_h)):
        return [*outcomes, RuleOutcome(rule, slope_name, slope, "MB/h", limit, "<=", interval[1] <= limit.value, sentence,
                                   severity)]
    if severity == "error":
        span_h = trend.span_to_decide(confidence, lambda lo, hi, span: hi <= allowed(span) or lo > allowed(span))
        undecided.append(f"{label} slope too close to call: {sentence}, against the limit of {limit.value:g} MB/h "
                         f"(or a fitted growth within {min_growth.value:g} MB): {_longer(span_h, warmup_s)}")
    return [*outcomes, RuleOutcome(rule, slope_name, slope, "MB/h")]


def _span_s(windows: Sequence[SoakWindow]) -> float:
    return windows[-1].end_s - windows[0].start_s if windows else 0.0


def _first_last(windows: Sequence[SoakWindow], read: Callable[[SoakWindow], float | None]) -> tuple[float, float]:
    values = [read(w) for w in windows if read(w) is not None]
    return values[0], values[-1]


def _dropped(windows: Sequence[SoakWindow], maximum: ThresholdValue) -> list[RuleOutcome]:
    scheduled = sum(w.sent + w.dropped for w in windows)
    if not scheduled:
        return []
    share = sum(w.dropped for w in windows) / scheduled
    return [RuleOutcome("offered-load", "requests the runner could not send on time", round(share, 6), "ratio", maximum,
                    "<=", share <= maximum.value,
                    f"the runner could not send {share:.2%} of the scheduled requests on time: the soak applied "
                    f"less than its target rate (a busy runner host, or a rate beyond one client)", "warning")]
