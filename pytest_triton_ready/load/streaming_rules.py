"""Decisions of the streaming checks (checks/test_streaming.py), kept here to be unit-tested: which
SLO applies, where the tokens/s curve bends or falls (on the points' confidence intervals, from
load/streaming_confidence.py), how much memory grew, and what a server-side histogram says about
the first response."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..thresholds import THRESHOLDS, ThresholdValue
from .confidence import Estimate
from .decision import FAIL, PASS, UNDECIDED, Judgement, judge, relative_rule
from .streaming_confidence import streaming_estimate, ttft_rule

# slo key -> the named threshold used without it
SLO_KEYS = {
    "ttft_p99_ms": "streaming_ttft_p99_ms",
    "itl_p99_ms": "streaming_itl_p99_ms",
    "min_output_tokens_per_s": "streaming_min_output_tokens_per_s",
}

# Server-side time-to-first-token families: (family, unit scale to ms, model label, which server)
FIRST_RESPONSE_FAMILIES = (
    ("nv_inference_first_response_histogram_ms", 1.0, "model", "Triton (2.52+ for decoupled models, "
                                                              "--metrics-config histogram_latencies=true)"),
    ("vllm:time_to_first_token_seconds", 1000.0, "model", "the vLLM backend"),
)


def streaming_slo(settings: Any, model: str) -> dict[str, ThresholdValue]:
    """The model's streaming objectives: `slo.<model>.<key>`, then `slo.default.<key>` from the
    YAML file (declared in settings.SloSection), then the named threshold (CLI, env, YAML thresholds, default)."""
    raw = (getattr(settings, "yaml", None) or {}).get("slo") or {} if settings is not None else {}
    own = (raw.get(model) or {}) if isinstance(raw, dict) else {}
    default = (raw.get("default") or {}) if isinstance(raw, dict) else {}
    chosen = {}
    for key, name in SLO_KEYS.items():
        unit = THRESHOLDS[name].unit
        if isinstance(own, dict) and own.get(key) is not None:
            chosen[key] = ThresholdValue(key, float(own[key]), unit, f"slo.{model}")
        elif isinstance(default, dict) and default.get(key) is not None:
            chosen[key] = ThresholdValue(key, float(default[key]), unit, "slo.default")
        else:
            chosen[key] = settings.threshold(name)
    return chosen


def measurement_problem(completed: int, success_rate: float | None, stuck: int, *, success_min: float,
                        min_requests: int) -> str | None:
    """Why a streaming measurement cannot stand for the model's capacity or SLO, or None: fewer than
    `min_requests` requests completed (its percentiles rest on too little), a success rate below
    `success_min`, or a stuck request (a stream whose final response never came)."""
    problems = []
    if completed < min_requests:
        problems.append(f"{completed} requests completed < minimum {min_requests} (streaming_min_requests)")
    if success_rate is None or success_rate < success_min:
        shown = "no request" if success_rate is None else f"{success_rate:.2%}"
        problems.append(f"success rate {shown} < {success_min:.2%} (success_rate_min)")
    if stuck:
        problems.append(f"{stuck} stuck requests")
    return "; ".join(problems) or None


@dataclass
class StreamingPoint:
    """One concurrency of the streaming sweep. `problem` (from `measurement_problem`) keeps a point
    out of the capacity: a point with failed, stuck or too few requests is not a capacity.
    `ttft` and `tokens`: the TTFT p99 and output tokens/s with their confidence intervals (measured
    points have them; without them a point's TTFT p99 is undecided, and a fall is judged on the values)."""

    concurrency: int
    tokens_per_s: float
    ttft_p99_ms: float | None
    problem: str | None = None
    ttft: Estimate | None = None
    tokens: Estimate | None = None

    @property
    def trustworthy(self) -> bool:
        return self.problem is None

    @classmethod
    def measured(cls, concurrency: int, stats: Any, *, success_min: float, min_requests: int,
                 level: float = 0.95, window_s: float = 2.0, shown_level: float | None = None) -> StreamingPoint:
        """The point a StreamingLoad's StreamStats give at `concurrency`, its intervals at `level`
        from windows of about `window_s` (load/streaming_confidence.py), labelled `shown_level`
        (the measurement's confidence, where `level` is one look's) when given."""
        problem = measurement_problem(stats.completed, stats.success_rate, len(stats.stuck),
                                      success_min=success_min, min_requests=min_requests)
        if not getattr(stats, "samples", None):  # stats put together without per-request samples
            return cls(concurrency, stats.output_tokens_per_s, stats.ttft_ms["p99"], problem)
        return cls(concurrency, stats.output_tokens_per_s, stats.ttft_ms["p99"], problem,
                   _labelled(streaming_estimate("ttft p99", stats, level, window_s), shown_level),
                   _labelled(streaming_estimate("output tokens/s", stats, level, window_s), shown_level))


def _labelled(estimate: Estimate, level: float | None) -> Estimate:
    if level is None or estimate.interval is None:
        return estimate
    return replace(estimate, interval=replace(estimate.interval, level=level))


def enough_valid(points: Sequence[StreamingPoint]) -> bool:
    """At least half of the sweep's points, and two (one for a one-point sweep), meet the rules:
    fewer cannot place a knee or a capacity."""
    valid = sum(1 for p in points if p.trustworthy)
    return bool(points) and valid >= min(2, len(points)) and 2 * valid >= len(points)


@dataclass
class CurveVerdict:
    knee: int | None
    best_within: StreamingPoint | None
    drops: list[tuple[int, int, float, float]] = field(default_factory=list)  # (from c, to c, tps before, tps after)
    ttft: list[tuple[int, Judgement]] = field(default_factory=list)  # (concurrency, TTFT p99 judged on the budget)
    unsure_drops: list[tuple[int, int, Judgement]] = field(default_factory=list)  # falls inside the noise
    best_ttft: Judgement | None = None  # the TTFT p99 of `best_within`, judged within the budget

    @property
    def too_close(self) -> list[tuple[int, Judgement]]:
        """The points whose TTFT p99 is too close to the budget to call."""
        return [(c, j) for c, j in self.ttft if j.outcome == UNDECIDED]


def judge_stream_curve(points: Sequence[StreamingPoint], ttft_budget_ms: float, knee_fraction: float = 0.9,
                drop_tolerance: float = 0.1) -> CurveVerdict:
    """The knee (first point with `knee_fraction` of the top tokens/s), the best tokens/s whose
    TTFT p99 is within the budget, and every fall of tokens/s by more than `drop_tolerance`
    between two points before the knee (a collapse where more streams should have helped).
    Only trustworthy points (enough requests, success rate met, nothing stuck) count. A point is
    within the budget only when its TTFT p99's interval is (one too close to call, or without an
    interval, is in `too_close`), and a fall counts only when the interval of after - (1 -
    drop_tolerance) x before lies below zero (one the noise may explain is in `unsure_drops`)."""
    points = [p for p in points if p.trustworthy]
    if not points:
        return CurveVerdict(None, None)
    top = max(p.tokens_per_s for p in points)
    knee = next((p.concurrency for p in points if p.tokens_per_s >= knee_fraction * top), None)
    verdict = CurveVerdict(knee, None)
    within = []
    for p in points:
        judged = judge(ttft_rule(ttft_budget_ms), p.ttft or Estimate("ttft p99", p.ttft_p99_ms, None, 0))
        verdict.ttft.append((p.concurrency, judged))
        if judged.outcome == PASS:
            within.append((p, judged))
    if within:
        verdict.best_within, verdict.best_ttft = max(within, key=lambda pair: pair[0].tokens_per_s)
    for before, after in zip(points, points[1:], strict=False):
        if knee is not None and after.concurrency > knee:
            break
        fell = before.tokens_per_s > 0 and after.tokens_per_s < before.tokens_per_s * (1 - drop_tolerance)
        if fell and before.tokens is not None and after.tokens is not None:
            judged = judge(relative_rule(f"output tokens/s at {after.concurrency} streams", "output tokens/s", ">=",
                                         before.tokens, 1 - drop_tolerance, "tokens/s"), after.tokens)
            if judged.outcome != FAIL:
                verdict.unsure_drops.append((before.concurrency, after.concurrency, judged))
                continue
        if fell:
            verdict.drops.append((before.concurrency, after.concurrency, before.tokens_per_s, after.tokens_per_s))
    return verdict


def capacity_is_lower_bound(points: Sequence[StreamingPoint], best: StreamingPoint | None, min_gain: float) -> bool:
    """True when the best point within the SLO is the sweep's last and tokens/s still rose by at
    least `min_gain` (a fraction) from the point before: the capacity lies beyond the sweep."""
    if best is None or len(points) < 2 or best is not points[-1] or not points[-2].trustworthy:
        return False
    before = points[-2].tokens_per_s
    return before > 0 and best.tokens_per_s >= before * (1 + min_gain)


def histogram_buckets(snapshot: Any, family: str, model_label: str, model: str) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) of one model's histogram, summed over other labels."""
    totals: dict[float, float] = {}
    for sample in snapshot.select(f"{family}_bucket"):
        if (sample.labels.get(model_label) if model_label in sample.labels else sample.labels.get("model_name")) != model:
            continue
        bound = float(sample.labels.get("le", "+Inf").replace("+Inf", "inf"))
        totals[bound] = totals.get(bound, 0.0) + sample.value
    return sorted(totals.items())


def bucket_delta(before: Iterable[tuple[float, float]], after: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    earlier = dict(before)
    return [(bound, count - earlier.get(bound, 0.0)) for bound, count in after]


def histogram_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets: linear inside the bucket; the
    highest finite bound when the rank falls in +Inf; None without observations."""
    if not buckets:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound


SUCCESS_COUNTER = "nv_inference_request_success"


def server_counted_requests(before: Any, after: Any, model: str) -> float | None:
    """How much the server's success counter (nv_inference_request_success) of `model` rose between
    two scrapes, or None when the endpoint exports no such series for the model: the count every
    Triton release keeps for streamed requests (a decoupled model counts each request once; one
    under iterative sequence batching counts every decode step), which MON-1 holds against the
    requests the client completed where no first-response histogram exists (Triton before 2.52)."""
    if not after.select(SUCCESS_COUNTER, model=model):
        return None
    return after.delta(before, SUCCESS_COUNTER, model=model)


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in str(version).split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def readiness_gates(version: str) -> dict[str, bool]:
    """Which ready endpoints can show a dead python stub on this Triton release: model readiness
    from 2.64 (25.12), strict server readiness from 2.68 (26.04)."""
    v = version_tuple(version)
    return {"model ready shows a dead stub": v >= (2, 64), "server ready shows a dead stub": v >= (2, 68)}


_DRAIN = re.compile(r"Found (\d+) model versions that have in-flight inferences")
_MODEL_IN_FLIGHT = re.compile(r"Model '(?P<model>[^']+)' \(version (?P<version>[^)]+)\) has (?P<n>\d+) in-flight inferences")
_LIVE = re.compile(r"Found (\d+) live models")
_LOADED = re.compile(r"successfully loaded '(?P<model>[^']+)'")
_UNLOADED = re.compile(r"successfully unloaded '(?P<model>[^']+)'")


@dataclass
class ShutdownLog:
    """What a Triton server's log says about its last SIGTERM, for one model."""

    signalled: bool  # a "Signal (15) received." line was found
    counted: int | None  # in-flight inferences the server counted for the model at its first drain check
    aborted: str | None  # the abort line (gRPC assertion, SIGABRT), if the server aborted
    live_lines: int  # "Found N live models" lines with N > 0: seconds spent waiting for models to unload
    exit_timeout: bool  # the server gave up at its exit timeout
    still_loaded: tuple[str, ...] = ()  # models the log shows loaded and never unloaded after the signal


def read_shutdown_log(log: str, model: str) -> ShutdownLog:
    """Read the part of `log` after the last "Signal (15) received." line: how many in-flight
    inferences Triton counted for `model` when it began to drain (Triton 2.51 counts only requests
    it has not released; a python-backend model releases a request when execute() returns), whether
    it aborted, how long it waited for live models, and whether its exit timeout expired."""
    start = log.rfind("Signal (15) received")
    if start < 0:
        return ShutdownLog(False, None, None, 0, False)
    lines = log[start:].splitlines()
    counted = None
    for index, line in enumerate(lines):
        drain = _DRAIN.search(line)
        if drain is None:
            continue
        counted = 0
        for follow in lines[index + 1:index + 1 + int(drain.group(1))]:
            match = _MODEL_IN_FLIGHT.search(follow)
            if match and match.group("model") == model:
                counted += int(match.group("n"))
        break
    aborted = next((line.strip() for line in lines if "ASSERTION FAILED" in line or "Signal (6)" in line
                    or "Signal (11)" in line), None)
    live = sum(1 for line in lines if (m := _LIVE.search(line)) and int(m.group(1)) > 0)
    loaded = dict.fromkeys(m.group("model") for m in _LOADED.finditer(log[:start]))
    unloaded = {m.group("model") for m in _UNLOADED.finditer(log[start:])}
    still = tuple(name for name in loaded if name not in unloaded) if live else ()
    return ShutdownLog(True, counted, aborted, live, "Exit timeout expired" in log[start:], still)
