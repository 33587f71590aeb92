"""PERF-3 for a decoupled model: a soak of streams (`streaming_soak_s` at `streaming_concurrency`)
during which server memory is read every second (the process tree's RSS where the run owns the
server, else the host's `nv_cpu_memory_used_bytes`), and its record: stuck and failed requests,
and memory growth judged by a least-squares fit, on its interval, only on a soak that ran long
enough to tell a leak from warm-up (`soak_leak_min_duration_s`): the span it actually ran, not the
one planned, since a load that ends early (a server gone, a broken stream) leaves a shorter record."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import progress
from ..duration import format_duration
from ..load.streaming.stats import StreamStats, report_stuck
from .trend import fit

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder

LEAK_RULE = "streaming-memory-leak"
SAMPLE_EVERY_S = 1.0
MEMORY_FROM_S = 1.5  # the first samples show the load starting, not the server's memory
STUCK_ADVICE = ("A stream without its final response holds a client forever: make sure the model sends "
                "TRITONSERVER_RESPONSE_COMPLETE_FINAL on every path (errors and cancellation included).")


def server_rss(triton: Any) -> float | None:
    """The RSS (bytes) of the server's process tree, where this run owns the server; else None."""
    pid = getattr(triton.launcher, "pid", None) if triton.owns_process else None
    if not pid:
        return None
    from ..launchers.process import tree_processes
    from .sampler import rss_of

    try:
        return rss_of(tree_processes(pid))
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
    ran_s: float | None = None  # how long the load ran after warm-up; None: the last memory sample's time

    @property
    def span_s(self) -> float:
        """The span the soak ran for: `ran_s`, else the time of its last memory sample."""
        if self.ran_s is not None:
            return self.ran_s
        return self.memory[-1][0] if self.memory else 0.0


def soak(streaming: Any, model: str, soak_s: float) -> StreamSoak:
    """Streams at `streaming_concurrency` for `soak_s`, memory and tokens sampled every second."""
    concurrency = int(streaming.n("streaming_concurrency"))
    read_memory, source = memory_reader(streaming.triton)
    warmup_s = streaming.warmup_s(model)
    load = streaming.load(streaming.plan(model), concurrency=concurrency, duration_s=soak_s, warmup_s=warmup_s)
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
    ran_s = round(max(0.0, time.monotonic() - started - warmup_s), 1)  # measured after warm-up
    return StreamSoak(model, source, load.wait().stats, memory, tokens, ran_s)


def record_stream_soak(check: CheckRecorder, soaked: StreamSoak, soak_s: float) -> str | None:
    """Record the soak on `check`; returns why its leak rule was not judged (None: it was)."""
    model, stats = soaked.model, soaked.stats
    check.setting("soak duration", round(soak_s, 1), "s", model=model, source="streaming_soak_s")
    check.measure("soak duration run", round(soaked.span_s, 1), "s", model=model)
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


def record_memory(check: CheckRecorder, soaked: StreamSoak, soak_s: float) -> str | None:
    """Memory growth over the soak (the least-squares line's, soak/trend.py), judged against
    `streaming_memory_growth_max_mb` only on a soak that ran (`soaked.span_s`) at least
    `soak_leak_min_duration_s`, on the growth's interval at `load_confidence`: within where its
    top is, a leak where its bottom is over the limit; returns why it was not judged or decided
    (None: it was)."""
    model, memory = soaked.model, soaked.memory
    trend = fit(memory) if len(memory) >= 3 else None
    if trend is None:
        return (f"{model}: server memory could not be read during the stream soak, so the memory-leak "
                "rule (streaming_memory_growth_max_mb) was not judged")
    growth_max = check.threshold("streaming_memory_growth_max_mb")
    leak_min = check.threshold("soak_leak_min_duration_s").value
    confidence = check.threshold("load_confidence").value
    ran_s = soaked.span_s
    growth, judged = trend.growth, ran_s >= leak_min
    low, high = trend.growth_low(confidence), trend.growth_high(confidence)
    decided = low is not None and (high <= growth_max.value or low > growth_max.value)
    check.measure(f"memory growth ({soaked.source})", round(growth, 1), "MB", model=model,
                  threshold=growth_max if judged and decided else None, rule=LEAK_RULE)
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
        return (f"{model}: memory growth too close to call: {growth:.1f} MB over the {ran_s:g} s stream soak, {shown}, "
                f"against streaming_memory_growth_max_mb = {growth_max.value:g} MB: {longer}")
    if growth > growth_max.value:
        check.finding(f"{model}: memory grew {growth:.0f} MB over a {ran_s:g} s stream soak; a soak shorter than "
                      f"{leak_min:g} s cannot tell a leak from warm-up", severity="warning", model=model)
    ran = f"{ran_s:g} s" if ran_s >= soak_s else f"{ran_s:g} s of the planned {soak_s:g} s"
    return (f"{model}: the memory-leak rule (streaming_memory_growth_max_mb) was not judged: a "
            f"stream soak that ran {ran}, and telling a leak from warm-up needs "
            f"soak_leak_min_duration_s = {leak_min:g} s (streaming_soak_s = {leak_min:g} or longer, or "
            "--triton-soak-evidence=PATH of a nightly soak)")


def stream_soak_identity(streaming: Any, models: list[str]) -> dict[str, Any]:
    """The server identity the stream soak runs against (soak/identity.py), with its streams per model."""
    from .identity import identity_of

    concurrency = int(streaming.n("streaming_concurrency"))
    return identity_of(streaming.triton, streaming.triton.settings, {}, {m: concurrency for m in models})


def stream_soak_off(check: CheckRecorder, settings: Any, identity: dict[str, Any]) -> str | None:
    """With the stream soak off, why PERF-3 is INCOMPLETE; None where soak evidence of a stream soak
    of this deployment judged it (soak/evidence.py)."""
    from . import soak_limits
    from .evidence import STREAM_SOAK, judge_on_evidence

    if not settings.triton_soak_evidence:
        return ("the stream soak is off (streaming_soak_s = 0) and no soak evidence (--triton-soak-evidence) "
                "stands in for it")
    return judge_on_evidence(check, settings.triton_soak_evidence, identity, soak_limits(settings), STREAM_SOAK,
                             "streaming_soak_s = 0")


def stream_evidence_stands_in(check: CheckRecorder, settings: Any, identity: dict[str, Any], unjudged: list[str]) -> list[str]:
    """What stays unjudged once soak evidence of a stream soak of this deployment (if given) judged
    the leak rule this soak could not."""
    from . import soak_limits
    from .evidence import STREAM_SOAK, stand_in

    return stand_in(check, settings.triton_soak_evidence, identity, soak_limits(settings), unjudged, STREAM_SOAK)
