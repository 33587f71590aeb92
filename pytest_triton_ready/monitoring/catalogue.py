"""What Triton exports: the metric families of Triton 2.51 (read in Triton's docs and seen on real
servers, see the project's triton-facts notes), the layer each belongs to, and when it exists.

The catalogue is how a rule about a metric this server cannot show (nv_gpu_* on a CPU-only server)
is told apart from a rule about a metric that exists nowhere (a typo, or a published guide's
invention such as `gpu_used_memory`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

INFRASTRUCTURE = "infrastructure"
SERVICE_HEALTH = "service health"
BUSINESS = "business"
COST = "cost"
LAYERS = (INFRASTRUCTURE, SERVICE_HEALTH, BUSINESS, COST)

# When a family exists on a server.
ALWAYS = "always"
GPU = "gpu"  # DCGM metrics: only where the server has GPUs (and no MIG / other DCGM agent)
SUMMARIES = "summary_latencies"  # --metrics-config summary_latencies=true
HISTOGRAMS = "histogram_latencies"  # --metrics-config histogram_latencies=true
CACHE = "response cache"  # --cache-config and a model with response_cache { enable: true }
PROMETHEUS = "prometheus"  # series Prometheus itself adds to every scrape
VLLM = "vllm backend"  # models served by Triton's vLLM backend (docs/streaming.md)
TRTLLM = "tensorrtllm backend"  # models served by Triton's TensorRT-LLM backend

CONDITION_HINTS = {
    GPU: "Triton exports it only on servers with GPUs (DCGM; not with MIG or another DCGM agent)",
    SUMMARIES: "start tritonserver with --metrics-config summary_latencies=true",
    HISTOGRAMS: "start tritonserver with --metrics-config histogram_latencies=true (decoupled models from Triton "
                "2.52, every model from 26.01)",
    CACHE: "start tritonserver with --cache-config and enable response_cache in a model config",
    VLLM: "exported only for models served by the vLLM backend",
    TRTLLM: "exported only for models served by the TensorRT-LLM backend",
}


@dataclass(frozen=True)
class Family:
    """One metric family Triton (or Prometheus) exports."""

    name: str
    type: str  # counter | gauge | summary | histogram
    layer: str
    condition: str = ALWAYS
    unit: str = ""


_FAMILIES = (
    # infrastructure
    Family("nv_gpu_utilization", "gauge", INFRASTRUCTURE, GPU, "ratio"),
    Family("nv_gpu_memory_total_bytes", "gauge", INFRASTRUCTURE, GPU, "B"),
    Family("nv_gpu_memory_used_bytes", "gauge", INFRASTRUCTURE, GPU, "B"),
    Family("nv_gpu_power_usage", "gauge", INFRASTRUCTURE, GPU, "W"),
    Family("nv_gpu_power_limit", "gauge", INFRASTRUCTURE, GPU, "W"),
    Family("nv_cpu_utilization", "gauge", INFRASTRUCTURE, ALWAYS, "ratio"),
    Family("nv_cpu_memory_total_bytes", "gauge", INFRASTRUCTURE, ALWAYS, "B"),
    Family("nv_cpu_memory_used_bytes", "gauge", INFRASTRUCTURE, ALWAYS, "B"),
    Family("nv_pinned_memory_pool_total_bytes", "gauge", INFRASTRUCTURE, ALWAYS, "B"),
    Family("nv_pinned_memory_pool_used_bytes", "gauge", INFRASTRUCTURE, ALWAYS, "B"),
    # service health
    Family("nv_inference_request_success", "counter", SERVICE_HEALTH, ALWAYS, "requests"),
    Family("nv_inference_request_failure", "counter", SERVICE_HEALTH, ALWAYS, "requests"),
    Family("nv_inference_pending_request_count", "gauge", SERVICE_HEALTH, ALWAYS, "requests"),
    Family("nv_inference_queue_duration_us", "counter", SERVICE_HEALTH, ALWAYS, "us"),
    Family("nv_inference_queue_summary_us", "summary", SERVICE_HEALTH, SUMMARIES, "us"),
    Family("up", "gauge", SERVICE_HEALTH, PROMETHEUS),
    Family("scrape_duration_seconds", "gauge", SERVICE_HEALTH, PROMETHEUS, "s"),
    Family("scrape_samples_scraped", "gauge", SERVICE_HEALTH, PROMETHEUS),
    # business performance
    Family("nv_inference_count", "counter", BUSINESS, ALWAYS, "inferences"),
    Family("nv_inference_exec_count", "counter", BUSINESS, ALWAYS, "executions"),
    Family("nv_inference_request_duration_us", "counter", BUSINESS, ALWAYS, "us"),
    Family("nv_inference_compute_input_duration_us", "counter", BUSINESS, ALWAYS, "us"),
    Family("nv_inference_compute_output_duration_us", "counter", BUSINESS, ALWAYS, "us"),
    Family("nv_inference_request_summary_us", "summary", BUSINESS, SUMMARIES, "us"),
    Family("nv_inference_compute_input_summary_us", "summary", BUSINESS, SUMMARIES, "us"),
    Family("nv_inference_compute_output_summary_us", "summary", BUSINESS, SUMMARIES, "us"),
    Family("nv_inference_first_response_histogram_ms", "histogram", BUSINESS, HISTOGRAMS, "ms"),
    # cost efficiency
    Family("nv_energy_consumption", "counter", COST, GPU, "J"),
    Family("nv_inference_compute_infer_duration_us", "counter", COST, ALWAYS, "us"),
    Family("nv_inference_compute_infer_summary_us", "summary", COST, SUMMARIES, "us"),
    Family("nv_cache_num_hits_per_model", "counter", COST, CACHE),
    Family("nv_cache_num_misses_per_model", "counter", COST, CACHE),
    Family("nv_cache_hit_duration_per_model", "counter", COST, CACHE, "us"),
    Family("nv_cache_miss_duration_per_model", "counter", COST, CACHE, "us"),
    Family("nv_cache_hit_summary_per_model", "summary", COST, CACHE, "us"),
    Family("nv_cache_miss_summary_per_model", "summary", COST, CACHE, "us"),
    Family("nv_cache_util", "gauge", COST, CACHE, "ratio"),
    Family("nv_cache_num_entries", "gauge", COST, CACHE),
    Family("nv_cache_num_hits", "counter", COST, CACHE),
    Family("nv_cache_num_misses", "counter", COST, CACHE),
    Family("nv_cache_num_lookups", "counter", COST, CACHE),
    Family("nv_cache_num_evictions", "counter", COST, CACHE),
    Family("nv_cache_lookup_duration", "counter", COST, CACHE, "us"),
    Family("nv_cache_insertion_duration", "counter", COST, CACHE, "us"),
    # LLM backends (streaming models): vLLM (label model/version in Triton's vLLM backend)
    Family("vllm:time_to_first_token_seconds", "histogram", BUSINESS, VLLM, "s"),
    Family("vllm:time_per_output_token_seconds", "histogram", BUSINESS, VLLM, "s"),
    Family("vllm:e2e_request_latency_seconds", "histogram", BUSINESS, VLLM, "s"),
    Family("vllm:request_prompt_tokens", "histogram", BUSINESS, VLLM, "tokens"),
    Family("vllm:request_generation_tokens", "histogram", BUSINESS, VLLM, "tokens"),
    Family("vllm:prompt_tokens_total", "counter", BUSINESS, VLLM, "tokens"),
    Family("vllm:generation_tokens_total", "counter", BUSINESS, VLLM, "tokens"),
    Family("vllm:request_success_total", "counter", SERVICE_HEALTH, VLLM, "requests"),
    Family("vllm:num_requests_running", "gauge", SERVICE_HEALTH, VLLM, "requests"),
    Family("vllm:num_requests_waiting", "gauge", SERVICE_HEALTH, VLLM, "requests"),
    Family("vllm:gpu_cache_usage_perc", "gauge", INFRASTRUCTURE, VLLM, "ratio"),
    # TensorRT-LLM backend (gauges, one label says which value)
    Family("nv_trt_llm_request_metrics", "gauge", SERVICE_HEALTH, TRTLLM, "requests"),
    Family("nv_trt_llm_runtime_memory_metrics", "gauge", INFRASTRUCTURE, TRTLLM, "B"),
    Family("nv_trt_llm_kv_cache_block_metrics", "gauge", INFRASTRUCTURE, TRTLLM, "blocks"),
    Family("nv_trt_llm_inflight_batcher_metrics", "gauge", BUSINESS, TRTLLM),
    Family("nv_trt_llm_v1_metrics", "gauge", BUSINESS, TRTLLM),
    Family("nv_trt_llm_general_metrics", "gauge", SERVICE_HEALTH, TRTLLM),
    Family("nv_trt_llm_disaggregated_serving_metrics", "gauge", SERVICE_HEALTH, TRTLLM),
    Family("nv_llm_input_token_len", "histogram", BUSINESS, TRTLLM, "tokens"),
    Family("nv_llm_output_token_len", "histogram", BUSINESS, TRTLLM, "tokens"),
)

CATALOGUE: dict[str, Family] = {f.name: f for f in _FAMILIES}

# Names seen in published guides and dashboards that Triton never exported, and what to use.
LOOKALIKES: dict[str, tuple[str, ...]] = {
    "nv_inference_compute_infer_histogram_ms": ("nv_inference_compute_infer_summary_us",
                                                "nv_inference_compute_infer_duration_us"),
    "nv_inference_request_histogram_ms": ("nv_inference_request_summary_us", "nv_inference_request_duration_us"),
    "nv_inference_queue_histogram_ms": ("nv_inference_queue_summary_us", "nv_inference_queue_duration_us"),
    "gpu_used_memory": ("nv_gpu_memory_used_bytes",),
    "gpu_total_memory": ("nv_gpu_memory_total_bytes",),
    "gpu_utilization": ("nv_gpu_utilization",),
    "nv_gpu_memory_used": ("nv_gpu_memory_used_bytes",),
    "nv_gpu_memory_total": ("nv_gpu_memory_total_bytes",),
    "nv_inference_request_success_total": ("nv_inference_request_success",),
    "nv_inference_request_failure_total": ("nv_inference_request_failure",),
    "nv_inference_count_total": ("nv_inference_count",),
    "nv_inference_exec_count_total": ("nv_inference_exec_count",),
}

SERIES_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}


def family_of(name: str, known: set[str] | None = None) -> Family | None:
    """The catalogue family a series name belongs to (`x_bucket` of histogram `x` included)."""
    if name in CATALOGUE:
        return CATALOGUE[name]
    for suffix in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(suffix)
        family = CATALOGUE.get(base) if base != name else None
        if family and suffix in SERIES_SUFFIXES.get(family.type, ()):
            return family
    return None


def base_name(name: str) -> str:
    """`name` without a _bucket/_sum/_count suffix."""
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def suggestions(name: str, present: set[str]) -> list[str]:
    """Metrics that exist (in `present` or the catalogue) and that `name` most likely meant."""
    base = base_name(name)
    if base in LOOKALIKES:
        return list(LOOKALIKES[base])
    if name in LOOKALIKES:
        return list(LOOKALIKES[name])
    candidates = sorted(present | set(CATALOGUE))
    return difflib.get_close_matches(name, candidates, n=2, cutoff=0.75)
