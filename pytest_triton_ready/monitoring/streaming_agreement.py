"""MON-1 for a decoupled model: over a short streamed load, the server's success counter counts at
least every request the client completed, and where the server exports a first-response histogram
its median agrees with the client's TTFT median (performance/streaming_rules.py reads the metrics)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..server.histograms import (
    FIRST_RESPONSE_FAMILIES,
    SUCCESS_COUNTER,
    bucket_delta,
    histogram_buckets,
    histogram_quantile,
    server_counted_requests,
)

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder

PROBE_CONCURRENCY = 2
PROBE_S = 2.0


def probe_agreement(streaming: Any, metrics: Any, model: str) -> int:
    """Stream to `model` between two scrapes (`metrics()`) and record what the server counted
    against the client; returns how many first-response histograms were compared."""
    check = streaming.check
    before = metrics()
    stats = streaming.load(streaming.plan(model), concurrency=PROBE_CONCURRENCY, duration_s=PROBE_S).run().stats
    after = metrics()
    check.measure("client TTFT p50", stats.ttft_ms["p50"], "ms", model=model)
    check.measure("requests the client completed", stats.completed, "requests", model=model, threshold=1,
                  comparison=">=", finding=f"{model}: no streamed request completed during the probe")
    record_counter(check, model, server_counted_requests(before, after, model), stats.completed)
    compared = record_histograms(check, model, before, after, stats.ttft_ms["p50"])
    families = sorted({n.split("_bucket")[0] for n in after.names if n.startswith(("nv_trt_llm_", "vllm:"))})
    if families:
        check.evidence(f"{model}: LLM backend metric families", ", ".join(families))
    return compared


def record_counter(check: CheckRecorder, model: str, counted: float | None, completed: int) -> None:
    """The success counter's rise against the requests the client completed."""
    check.measure(f"server {SUCCESS_COUNTER} rise", counted, "requests", model=model, threshold=completed,
                  comparison=">=",
                  finding=f"{model}: {SUCCESS_COUNTER} rose by {counted:.0f} while the client completed "
                          f"{completed} streamed requests: the metrics miss streamed traffic (or the URL "
                          "spreads requests over servers whose metrics are not read)" if counted is not None
                  else None)
    if counted is None:
        check.evidence(f"{model}: missing series", f"the metrics endpoint exports no {SUCCESS_COUNTER} "
                       f"series with model=\"{model}\"")


def record_histograms(check: CheckRecorder, model: str, before: Any, after: Any, client_p50: float | None) -> int:
    """Each first-response histogram's median against the client's TTFT median; returns how many
    histograms had observations."""
    agreement = check.threshold("streaming_ttft_agreement_ms")
    compared = 0
    for family, scale, label, source in FIRST_RESPONSE_FAMILIES:
        buckets = bucket_delta(histogram_buckets(before, family, label, model), histogram_buckets(after, family, label, model))
        server_p50 = histogram_quantile(buckets, 0.5)
        if server_p50 is None:
            continue
        compared += 1
        server_ms = server_p50 * scale
        check.measure(f"server first response p50 ({family})", round(server_ms, 3), "ms", model=model)
        check.measure("TTFT gap, client - server", round(abs(client_p50 - server_ms), 3) if client_p50 is not None
                      else None, "ms", model=model, threshold=agreement,
                      finding=f"{model}: {source} puts the first response at {server_ms:.1f} ms (median), "
                              f"the client measured {client_p50} ms: one of the two is not measuring TTFT")
    return compared


def no_histogram_caveat(version: str) -> str:
    return (f"TTFT agreement not judged: Triton {version} exports no first-response histogram for these "
            "models (nv_inference_first_response_histogram_ms needs 2.52+ with --metrics-config "
            "histogram_latencies=true for decoupled models, all models from 26.01; or the vLLM backend); "
            "the request counter was judged and the client's TTFT is recorded")
