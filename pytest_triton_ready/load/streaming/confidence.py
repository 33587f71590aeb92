"""Confidence intervals of the streaming checks' statistics (TTFT and ITL percentiles, output
tokens/s), made from one streaming measurement's per-request samples.

A streaming measurement has no windows of its own: its span (first send to last response) is cut
into equal time windows of about `window_s` (at least `MIN_WINDOWS`), and each window is one batch
of the batch means, as the unary engine's windows are. The intervals are load/confidence.py's, and
a rule on them is decided by load/decision.py's `judge`:

- `TTFT p99`, `ITL p50` ... (statistic `ttft p99`, `itl p50`): each completed request counts in
  the window in which it ended; `percentile_interval` over the histogram of every completed
  request and the windows' own percentiles;
- `output tokens/s`: each request's tokens spread evenly from its first to its last response
  with output (when they came, not when the request ended: a window is not emptied or filled by
  where long requests happen to end); `batch_means` of each window's tokens / its length. The
  value is all output tokens / the span, as StreamStats reports it (the windows' mean);
- `success rate`: each ended request (a stuck one failed) counts once; the exact binomial
  interval of all successes of all ended requests (`proportion_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..confidence import Estimate, batch_means, clipped, percentile_interval, proportion_interval
from ..decision import Rule
from ..stats import LatencyHistogram

MIN_WINDOWS = 3


@dataclass
class StreamWindow:
    """The requests of a streaming measurement that ended in [start, end)."""

    start: float
    end: float
    ttft: LatencyHistogram = field(default_factory=LatencyHistogram)
    itl: LatencyHistogram = field(default_factory=LatencyHistogram)
    tokens: float = 0.0
    ended: int = 0
    succeeded: int = 0

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.ended if self.ended else None

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / (self.end - self.start) if self.end > self.start else 0.0


def stream_windows(samples: Sequence[Any], start: float, end: float, window_s: float) -> list[StreamWindow]:
    """[start, end] cut into equal windows of about `window_s` (at least MIN_WINDOWS), each sample
    in the window in which its request ended (one ending outside the span in the nearest)."""
    span = end - start
    if span <= 0 or not samples:
        return []
    count = max(MIN_WINDOWS, math.floor(span / window_s + 1e-9))
    width = span / count
    windows = [StreamWindow(start + i * width, start + (i + 1) * width) for i in range(count)]
    def index(t: float) -> int:
        return min(count - 1, max(0, math.floor((t - start) / width)))

    for sample in samples:
        window = windows[index(sample.end)]
        _spread_tokens(windows, sample, index)
        window.ended += 1
        window.succeeded += int(getattr(sample, "ok", True))
        if sample.ttft_s is not None:
            window.ttft.record_s(sample.ttft_s)
        if sample.itl_s is not None:
            window.itl.record_s(sample.itl_s)
    return windows


def _spread_tokens(windows: list[StreamWindow], sample: Any, index: Any) -> None:
    """The sample's tokens into the windows its responses with output came in, evenly from the
    first to the last (all in one window when they came at one instant, or at the end without one)."""
    first, last = getattr(sample, "first", None), getattr(sample, "last", None)
    if first is None or last is None or last <= first:
        windows[index(first if first is not None else sample.end)].tokens += sample.tokens
        return
    for i in range(index(first), index(last) + 1):
        window = windows[i]
        low = first if i == 0 else max(first, window.start)
        high = last if i == len(windows) - 1 else min(last, window.end)
        windows[i].tokens += sample.tokens * max(0.0, high - low) / (last - first)


def measurement_windows(stats: Any, window_s: float) -> list[StreamWindow]:
    """The windows of one StreamStats (none without samples or a span)."""
    if stats.started is None:
        return []
    return stream_windows(stats.samples, stats.started, stats.started + stats.duration_s, window_s)


def streaming_estimate(statistic: str, stats: Any, level: float, window_s: float) -> Estimate:
    """`statistic` ('ttft p99', 'itl p99', any percentile of either, 'output tokens/s' or 'success
    rate') of a
    StreamStats with its interval at `level` (None where fewer than two windows have a value)."""
    windows = measurement_windows(stats, window_s)
    if statistic == "output tokens/s":
        value = stats.output_tokens_per_s if stats.duration_s > 0 else None
        return Estimate(statistic, value, clipped(batch_means([w.tokens_per_s for w in windows], level)), len(windows))
    if statistic == "success rate":
        ended, succeeded = sum(w.ended for w in windows), sum(w.succeeded for w in windows)
        return Estimate(statistic, succeeded / ended if ended else None, proportion_interval(succeeded, ended, level),
                        len(windows), trials=ended)
    kind, _, name = statistic.partition(" ")
    if kind not in ("ttft", "itl") or not name.startswith("p"):
        raise ValueError(f"unknown streaming statistic {statistic!r}")
    percentile = float(name[1:])
    merged = LatencyHistogram()
    for window in windows:
        merged.add(getattr(window, kind))
    if not merged.count:
        return Estimate(statistic, None, None, len(windows))
    return Estimate(statistic, merged.percentile_ms(percentile),
                    clipped(percentile_interval(merged, [getattr(w, kind) for w in windows], percentile, level)),
                    len(windows), trials=merged.count)


def ttft_rule(budget_ms: float) -> Rule:
    return Rule("TTFT p99", "ttft p99", "<=", float(budget_ms), "ms")


def success_rule(success_min: float) -> Rule:
    """Every streamed request succeeds (`success_rate_min`): judged whatever the validity, as the
    unary success rate is (a model that fails every request fails on it). Only a decided failure
    matters (`failure_only`): showing a minimum such as 0.999 takes thousands of clean streams
    (load/confidence.py `trials_needed`), more than a streaming measurement's looks hold; the
    server's success rate is shown by unary PERF-1, and the streaming checks say how many streams
    theirs would need."""
    return Rule("success rate", "success rate", ">=", float(success_min), "ratio", needs_validity=False,
                failure_only=True)


def stream_slo_rules(slo: dict[str, Any]) -> list[Rule]:
    """PERF-1's rules from a model's streaming SLO (performance/streaming_rules.streaming_slo): TTFT p99 and
    ITL p99 within their budgets, output tokens/s at least the minimum where one is set."""
    rules = [ttft_rule(slo["ttft_p99_ms"].value), Rule("ITL p99", "itl p99", "<=", float(slo["itl_p99_ms"].value), "ms")]
    if slo["min_output_tokens_per_s"].value > 0:
        rules.append(Rule("output tokens/s", "output tokens/s", ">=", float(slo["min_output_tokens_per_s"].value),
                          "tokens/s"))
    return rules
