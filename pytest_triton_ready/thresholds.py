"""Named thresholds: every number a check compares with, its default, unit and meaning.

A team overrides any of them under `thresholds:` in the YAML file or with
`--triton-threshold NAME=VALUE`; the report shows each value with where it came from.
A name not listed here is a usage error, so a typo cannot silently keep the default.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ThresholdSpec:
    default: float
    unit: str
    help: str


@dataclass(frozen=True)
class ThresholdValue:
    """A threshold as a check uses it: the number and where it came from."""

    name: str
    value: float
    unit: str
    source: str  # default | ini | yaml:<file> | env:<VAR> | cli


THRESHOLDS: dict[str, ThresholdSpec] = {
    "startup_ready_timeout_s": ThresholdSpec(120.0, "s", "longest wait for a launched server to become ready"),
    "success_rate_min": ThresholdSpec(0.999, "ratio", "lowest acceptable share of successful requests"),
    "metrics_scrape_timeout_s": ThresholdSpec(5.0, "s", "longest acceptable time to answer a metrics scrape"),
    "queue_delay_budget_fraction": ThresholdSpec(0.8, "ratio", "largest share of a model's p99 budget its max_queue_delay may take"),
    "gpu_memory_used_max_fraction": ThresholdSpec(0.9, "ratio", "highest GPU memory use per GPU once every model is loaded"),
    "cpu_memory_used_max_fraction": ThresholdSpec(0.9, "ratio", "highest host memory use once every model is loaded"),
    "attestation_max_age_days": ThresholdSpec(90.0, "days", "oldest acceptable runbook, disaster-recovery or training record (OPS-1, OPS-3, OPS-4)"),
    "capacity_headroom": ThresholdSpec(0.3, "ratio", "spare capacity planned above the declared peak rate (OPS-2)"),
    "tls_cert_expiry_warning_days": ThresholdSpec(30.0, "days", "a server certificate expiring sooner is a warning (SEC-2)"),
    "malformed_oversize_payload_mib": ThresholdSpec(80.0, "MiB", "size of the oversize request SEC-3 sends; a server should refuse it"),
    "queue_p95_max_ms": ThresholdSpec(50.0, "ms", "highest acceptable P95 queue time per model (summaries on)"),
    # streaming (decoupled) models: checks/test_streaming.py, docs/streaming.md
    "streaming_ttft_p99_ms": ThresholdSpec(1000.0, "ms", "PERF-1 streaming: p99 time to first token without a ttft_p99_ms SLO"),
    "streaming_itl_p99_ms": ThresholdSpec(200.0, "ms", "PERF-1 streaming: p99 inter-token latency without an itl_p99_ms SLO"),
    "streaming_min_output_tokens_per_s": ThresholdSpec(0.0, "tokens/s", "PERF-1 streaming: lowest output token throughput without a min_output_tokens_per_s SLO (0: none)"),
    "streaming_concurrency": ThresholdSpec(8, "streams", "PERF-1/PERF-3 streaming: concurrent streams (closed loop, one request in flight each)"),
    "streaming_max_tokens": ThresholdSpec(32, "tokens", "output tokens each streaming request asks for"),
    "streaming_duration_s": ThresholdSpec(6.0, "s", "PERF-1 streaming: length of the measurement after a 1 s warm-up"),
    "streaming_curve_max_concurrency": ThresholdSpec(16, "streams", "PERF-2 streaming: highest concurrency of the tokens/s and TTFT curve"),
    "streaming_curve_point_s": ThresholdSpec(3.0, "s", "PERF-2 streaming: measurement per curve point"),
    "streaming_final_deadline_s": ThresholdSpec(10.0, "s", "a streaming request without its final response this long after its send is stuck"),
    "streaming_soak_s": ThresholdSpec(30.0, "s", "PERF-3 streaming: length of the stream soak (0: off)"),
    "streaming_memory_growth_max_mb": ThresholdSpec(64.0, "MB", "PERF-3 streaming: highest growth of server memory (RSS) over the stream soak"),
    "streaming_cancel_recovery_max_s": ThresholdSpec(10.0, "s", "PERF-4 streaming: longest time after cancelling streams mid-generation until every instance serves"),
    "streaming_ttft_agreement_ms": ThresholdSpec(50.0, "ms", "MON-1 streaming: largest gap between the server's first-response median and the client's TTFT median"),
    # PERF-3, the soak (docs/soak.md)
    "soak_rate_fraction": ThresholdSpec(0.5, "ratio", "share of PERF-2's highest throughput within SLO that the soak drives per model"),
    "soak_default_rate_infer_s": ThresholdSpec(10.0, "infer/s", "soak rate per model when neither PERF-2 nor soak.rate gives one"),
    "soak_p99_drift_ratio_max": ThresholdSpec(1.5, "ratio", "highest p99 of the soak's last quarter over its first quarter"),
    "soak_p99_drift_min_ms": ThresholdSpec(5.0, "ms", "a p99 rise smaller than this is not drift, whatever the ratio"),
    "soak_server_memory_slope_max_mb_h": ThresholdSpec(20.0, "MB/h", "highest growth of server memory over the soak (least-squares slope)"),
    "soak_gpu_memory_slope_max_mb_h": ThresholdSpec(20.0, "MB/h", "highest growth of GPU memory over the soak (least-squares slope)"),
    "soak_leak_min_duration_s": ThresholdSpec(600.0, "s", "a soak shorter than this (after warm-up) reports memory growth as a warning: too short to tell a leak from warm-up"),
    "soak_leak_min_growth_mb": ThresholdSpec(32.0, "MB", "fitted memory growth below this is noise, not a leak, whatever the slope"),
    "soak_pending_growth_max": ThresholdSpec(8.0, "requests", "highest fitted growth of pending requests over the soak"),
    "soak_runner_memory_slope_max_mb_h": ThresholdSpec(20.0, "MB/h", "highest growth of the runner's own RSS (a warning: it questions the measurement)"),
    "soak_dropped_max": ThresholdSpec(0.01, "ratio", "highest share of scheduled requests the runner may fail to send on time (a warning)"),
    # load engine: measurement windows, stability (perf_analyzer) and validity (MLPerf LoadGen)
    "load_warmup_s": ThresholdSpec(1.0, "s", "traffic before the first measurement window, excluded from every number"),
    "load_window_s": ThresholdSpec(2.0, "s", "length of one measurement window"),
    "load_stability_windows": ThresholdSpec(3, "windows", "how many last windows must agree for a measurement to be stable"),
    "load_stability_tolerance": ThresholdSpec(0.10, "ratio", "largest max/min spread of throughput and mean latency across those windows"),
    "load_max_windows": ThresholdSpec(10, "windows", "windows measured at most before a measurement is declared unstable"),
    "load_min_duration_s": ThresholdSpec(6.0, "s", "validity: shortest span of the reported windows"),
    "load_min_requests": ThresholdSpec(200, "requests", "validity: fewest completed requests in the reported windows"),
    "reload_failed_requests_max": ThresholdSpec(0, "requests", "requests that may fail while a model reloads or a new version rolls out under traffic"),
    "reload_serve_max_s": ThresholdSpec(30.0, "s", "longest time from a reload request until the reloaded (or new) version serves"),
    "instance_recovery_max_s": ThresholdSpec(30.0, "s", "longest time from the recovery action (unload + load) until every instance of the model answers"),
    "server_restart_max_s": ThresholdSpec(60.0, "s", "longest time from a server crash (SIGKILL) and restart until the first correct inference"),
    "shutdown_lost_requests_max": ThresholdSpec(0, "requests", "requests the server may take and then drop without an answer during a graceful shutdown (SIGTERM)"),
    "shutdown_ready_drop_max_s": ThresholdSpec(1.0, "s", "longest time from SIGTERM until readiness stops answering 200"),
    # performance phase (PERF-1, PERF-2) and CFG-2
    "capacity_default_p99_ms": ThresholdSpec(100.0, "ms", "p99 budget that defines 'within SLO' for a model with no p99 SLO"),
    "perf_target_concurrency": ThresholdSpec(8, "requests", "PERF-1 closed-loop concurrency for a model with no min_throughput SLO"),
    "perf_throughput_ratio_min": ThresholdSpec(0.95, "ratio", "PERF-1: lowest achieved/offered throughput at the target load"),
    "curve_max_concurrency": ThresholdSpec(0, "requests", "PERF-2/CFG-2: cap on the swept concurrency (0: 2 x max_batch_size x instances)"),
    "curve_knee_fraction": ThresholdSpec(0.90, "ratio", "PERF-2: the knee is the first point reaching this share of the highest throughput"),
    "curve_drop_tolerance": ThresholdSpec(0.10, "ratio", "PERF-2: largest throughput fall allowed between two points before the knee"),
    "batching_min_average_batch_size": ThresholdSpec(1.0, "requests", "CFG-2: average batch size at saturation must be above this"),
    "batching_preferred_fraction": ThresholdSpec(0.5, "ratio", "CFG-2: average batch must reach this share of the smallest preferred size"),
    "batching_queue_share_max": ThresholdSpec(0.40, "ratio", "CFG-2: largest share of server latency spent queued before advice is given"),
    "gpu_utilization_min": ThresholdSpec(0.70, "ratio", "GPU utilization under load: lower edge of the healthy band"),
    "gpu_utilization_max": ThresholdSpec(0.85, "ratio", "GPU utilization under load: upper edge of the healthy band"),
}
