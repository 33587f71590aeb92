"""PERF-3 for a decoupled model: a soak of streams (`streaming_soak_s` at `streaming_concurrency`)
during which server memory is read every second (the process tree's RSS where the run owns the
server, else the host's `nv_cpu_memory_used_bytes`), and its record: stuck and failed requests,
and memory growth judged by a least-squares fit, on its interval, only on a soak long enough to
tell a leak from warm-up (`soak_leak_min_duration_s`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import progress
from ..faults.stream_judges import report_stuck
from ..soak.duration import format_duration
from ..soak.trend import fit
from .streaming_stats import StreamStats

SAMPLE_EVERY_S = 1.0
MEMORY_FROM_S = 1.5  # the first samples show the load starting, not the server's memory
STUCK_ADVICE = ("A stream without its final response holds a client forever: make sure the model sends "
                "TRITONSERVER_RESPONSE_COMPLETE_FINAL on every path (errors and cancellation included).")


def server_rss(triton: Any) -> float | None:
    """The RSS (bytes) of the server's process tree, where this run owns the server; else None."""
    pid = getattr(triton.launcher, "pid", None) if triton.owns_process else None
    if not pid:
        return None
    from ..soak.sampler import process_tree, rss_of

    try:
        return rss_of(process_tree(pid))
    except Exception:  # noqa: BLE001 - the server went away; the soak says so elsewhere
        return None


def host_memory(triton: Any) -> float | None:
    """The host memory in use (bytes) the server's metrics report, or None."""
    try:
        used = triton.scrape_metrics().select("nv_cpu_memory_used_bytes")
    except Exception:  # noqa: BLE001 - no metrics: the leak rule is not judged, and says so
        return None
    return used[0].value if used and used[0].value > 0 else None


def memory_reader(triton: Any) -> tuple[Callable[[], float | None], str]:
    """How to read server memory, and what it is called in the record."""
    if server_rss(triton) is not None:
        return (lambda: server_rss(triton)), "server process tree RSS"
    return (lambda: host_memory(triton)), "host memory (nv_cpu_memory_used_bytes)"


@dataclass
class StreamSoak:
    """What one model's stream soak measured: the stats, memory (s, MB) and tokens per second."""

    model: str
    source: str
    stats: StreamStats
    memory: list[tuple[float, float]] = field(default_factory=list)
    tokens: list[tuple[float, float]] = field(default_factory=list)


def soak(streaming: Any, model: str, soak_s: float) -> StreamSoak:
    """Streams at `streaming_concurrency` for `soak_s`, memory and tokens sampled every second."""
    concurrency = int(streaming.n("streaming_concurrency"))
    read_memory, source = memory_reader(streaming.triton)
    load = streaming.load(streaming.plan(model), concurrency=concurrency, duration_s=soak_s,
                          warmup_s=streaming.warmup_s(model))
    memory: list[tuple[float, float]] = []
    tokens: list[tuple[float, float]] = []
    started, last_tokens = time.monotonic(), 0
    load.start()
    while load.running:
        time.sleep(SAMPLE_EVERY_S)
        now = time.monotonic() - started
        value = read_memory()
        if value is not None and now > MEMORY_FROM_S:
            memory.append((round(now, 1), value / 1e6))
        total = load.tokens_so_far()
        tokens.append((round(now, 1), total - last_tokens))
        last_tokens = total
        progress.status(f"{model}: stream soak {now:.0f} of {soak_s:g} s, {concurrency} streams, {total} tokens"
                        + (f", memory {memory[-1][1]:.0f} MB" if memory else ""))
    return StreamSoak(model, source, load.wait().stats, memory, tokens)


def record_soak(check: Any, soaked: StreamSoak, soak_s: float) -> str | None:
    """Record the soak on `check`; returns why its leak rule was not judged (None: it was)."""
    model, stats = soaked.model, soaked.stats
    check.setting("soak duration", round(soak_s, 1), "s", model=model, source="streaming_soak_s")
    check.measure("requests completed", stats.completed, "requests", model=model)
    check.measure("output tokens/s", round(stats.output_tokens_per_s, 2), "tokens/s", model=model)
    check.measure("TTFT p99", stats.ttft_ms["p99"], "ms", model=model)
    deadline_s = check.threshold("streaming_final_deadline_s").value
    check.measure("stuck requests", len(stats.stuck), "requests", model=model, threshold=0,
                  finding=f"{model}: {len(stats.stuck)} of {stats.attempted} requests never got their final response "
                          f"within {deadline_s:g} s")
    report_stuck(check, model, stats.stuck)
    check.measure("failed requests", stats.count_errors, "requests", model=model, threshold=0)
    for reason, count in stats.errors.items():
        check.evidence(f"{model} errors", f"{count} x {reason}")
    unjudged = record_memory(check, soaked, soak_s)
    check.chart(f"{model}: output tokens per second during the stream soak", "time (s)", "tokens",
                {"tokens": soaked.tokens})
    if stats.stuck:
        check.recommend(STUCK_ADVICE)
    return unjudged


def record_memory(check: Any, soaked: StreamSoak, soak_s: float) -> str | None:
    """Memory growth over the soak (the least-squares line's, soak/trend.py), judged against
    `streaming_memory_growth_max_mb` only on a soak of at least `soak_leak_min_duration_s`, on the
    growth's interval at `load_confidence`: within where its top is, a leak where its bottom is
    over the limit; returns why it was not judged or decided (None: it was)."""
    model, memory = soaked.model, soaked.memory
    trend = fit(memory) if len(memory) >= 3 else None
    if trend is None:
        return (f"{model}: server memory could not be read during the stream soak, so the memory-leak "
                "rule (streaming_memory_growth_max_mb) was not judged")
    growth_max = check.threshold("streaming_memory_growth_max_mb")
    leak_min = check.threshold("soak_leak_min_duration_s").value
    confidence = check.threshold("load_confidence").value
    growth, judged = trend.growth, soak_s >= leak_min
    low, high = trend.growth_low(confidence), trend.growth_high(confidence)
    decided = low is not None and (high <= growth_max.value or low > growth_max.value)
    check.measure(f"memory growth ({soaked.source})", round(growth, 1), "MB", model=model,
                  threshold=growth_max if judged and decided else None)
    check.chart(f"{model}: memory during the stream soak", "time (s)", "MB", {soaked.source: memory})
    if judged and decided:
        return None
    if judged:
        shown = f"{confidence:.0%} interval [{low:.1f}, {high:.1f}] MB" if low is not None else "no interval"
        span_h = trend.span_to_decide(confidence, lambda lo, hi, span: hi * span <= growth_max.value
                                      or lo * span > growth_max.value)
        longer = (f"a stream soak of about {format_duration(span_h * 3600)} (streaming_soak_s) would decide it if the "
                  "trend holds (its interval narrows as 1 / duration^1.5)" if span_h is not None
                  else "a longer stream soak would not decide it if the trend holds: run on a quieter machine")
        return (f"{model}: memory growth too close to call: {growth:.1f} MB over the {soak_s:g} s stream soak, {shown}, "
                f"against streaming_memory_growth_max_mb = {growth_max.value:g} MB: {longer}")
    if growth > growth_max.value:
        check.finding(f"{model}: memory grew {growth:.0f} MB over a {soak_s:g} s stream soak; a soak shorter than "
                      f"{leak_min:g} s cannot tell a leak from warm-up", severity="warning", model=model)
    return (f"{model}: the memory-leak rule (streaming_memory_growth_max_mb) was not judged: a "
            f"stream soak of {soak_s:g} s, and telling a leak from warm-up needs "
            f"soak_leak_min_duration_s = {leak_min:g} s (streaming_soak_s = {leak_min:g} or longer)")
