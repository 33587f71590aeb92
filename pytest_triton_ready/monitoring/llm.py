"""The four layers' values that LLM (streaming) deployments add: Triton's first-response histogram,
the vLLM backend's `vllm:*` families and the TensorRT-LLM backend's `nv_trt_llm_*` gauges. Absent
families add nothing; docs/streaming.md lists what each needs."""

from __future__ import annotations

from ..server.histograms import bucket_delta, histogram_buckets, histogram_quantile
from ..server.metrics import MetricsSnapshot
from .catalogue import BUSINESS, INFRASTRUCTURE, SERVICE_HEALTH
from .values import LayerValue

# (family, scale to ms, layer, value name)
_HISTOGRAMS = (
    ("nv_inference_first_response_histogram_ms", 1.0, "time to first response"),
    ("vllm:time_to_first_token_seconds", 1000.0, "time to first token (vLLM)"),
    ("vllm:time_per_output_token_seconds", 1000.0, "time per output token (vLLM)"),
)


def _models(snapshot: MetricsSnapshot, name: str) -> dict[str, str]:
    """model -> the label that names it ('model' in Triton's backends, 'model_name' in vLLM's own server)."""
    found = {}
    for sample in snapshot.select(name):
        for label in ("model", "model_name"):
            if label in sample.labels:
                found[sample.labels[label]] = label
                break
    return found


def llm_layer_values(before: MetricsSnapshot, after: MetricsSnapshot, window_s: float) -> list:
    values = []
    for family, scale, name in _HISTOGRAMS:
        for model, label in _models(after, f"{family}_bucket").items():
            buckets = bucket_delta(histogram_buckets(before, family, label, model),
                                   histogram_buckets(after, family, label, model))
            for q in (0.5, 0.99):
                value = histogram_quantile(buckets, q)
                values.append(LayerValue(BUSINESS, f"{name} P{q * 100:g}", value * scale if value is not None else None,
                                         "ms", model=model, note="" if value is not None else "no observations in the window"))
    for model, label in _models(after, "vllm:generation_tokens_total").items():
        grown = after.total("vllm:generation_tokens_total", **{label: model}) - \
            before.total("vllm:generation_tokens_total", **{label: model})
        values.append(LayerValue(BUSINESS, "output tokens/s (vLLM)", grown / window_s if window_s else None, "tokens/s", model=model))
    for family, layer, name in (("vllm:num_requests_waiting", SERVICE_HEALTH, "requests waiting (vLLM)"),
                                ("vllm:num_requests_running", SERVICE_HEALTH, "requests running (vLLM)"),
                                ("vllm:gpu_cache_usage_perc", INFRASTRUCTURE, "KV cache usage (vLLM)")):
        for model, label in _models(after, family).items():
            values.append(LayerValue(layer, name, after.total(family, **{label: model}), "", model=model))
    for model in _models(after, "nv_trt_llm_request_metrics"):
        for kind in ("active", "scheduled", "max"):
            samples = after.select("nv_trt_llm_request_metrics", model=model, request_type=kind)
            if samples:
                values.append(LayerValue(SERVICE_HEALTH, f"{kind} requests (TensorRT-LLM)", samples[0].value, "requests", model=model))
    for model in _models(after, "nv_trt_llm_kv_cache_block_metrics"):
        used = after.select("nv_trt_llm_kv_cache_block_metrics", model=model, kv_cache_block_type="used")
        most = after.select("nv_trt_llm_kv_cache_block_metrics", model=model, kv_cache_block_type="max")
        if used and most and most[0].value > 0:
            values.append(LayerValue(INFRASTRUCTURE, "KV cache blocks used (TensorRT-LLM)", used[0].value / most[0].value,
                                     "ratio", model=model))
    return values
