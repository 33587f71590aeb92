"""Prometheus histograms and counters of a scraped Triton metrics endpoint, read as Prometheus reads
them: one model's buckets, their growth between two scrapes, a quantile (`histogram_quantile`),
and the requests the server counted; and the server-side first-response families MON-1 and the
streaming checks hold a client's time to first token against."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

# Server-side time-to-first-token families: (family, unit scale to ms, model label, which server)
FIRST_RESPONSE_FAMILIES = (
    ("nv_inference_first_response_histogram_ms", 1.0, "model", "Triton (2.52+ for decoupled models, "
                                                              "--metrics-config histogram_latencies=true)"),
    ("vllm:time_to_first_token_seconds", 1000.0, "model", "the vLLM backend"),
)

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
