"""Named thresholds: every number a check compares with, its default, unit, meaning and range.

A team overrides any of them under `thresholds:` in the YAML file or with
`--triton-threshold NAME=VALUE`; the report shows each value with where it came from.
A name not listed here is a usage error, so a typo cannot silently keep the default; so is a value
outside the threshold's range (a share above 1, a negative duration, nan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    """The values a threshold may take: low/high bounds (open or closed), whole numbers only."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    integer: bool = False

    def problem(self, value: float) -> str | None:
        """Why `value` is outside the range, or None."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, got {value!r}"
        if not math.isfinite(value):
            return f"must be a finite number, got {value}"
        if self.integer and value != int(value):
            return f"must be a whole number, got {value:g}"
        below = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        if below or (self.high is not None and value > self.high):
            return f"must be {self.describe()}, got {value:g}"
        return None

    def describe(self) -> str:
        """`in [0, 1]`, `> 0`, `>= 1`: how docs and errors state the range."""
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return "any number"

    def field(self) -> dict[str, Any]:
        """The same bounds as pydantic Field constraints, for a YAML key that sets a threshold."""
        bounds: dict[str, Any] = {}
        if self.low is not None:
            bounds["gt" if self.low_open else "ge"] = self.low
        if self.high is not None:
            bounds["le"] = self.high
        return bounds


RATIO = Range(0.0, 1.0)                     # a share or rate: 0..1
FRACTION = Range(0.0, 1.0, low_open=True)   # a share that must not be zero
POSITIVE = Range(0.0, low_open=True)        # durations, timeouts, rates: > 0
NON_NEGATIVE = Range(0.0)                   # limits where 0 means "none allowed" or "always"
COUNT = Range(1.0, integer=True)            # how many (windows, requests, concurrency): >= 1
CONFIDENCE = Range(0.5, 0.999)              # a confidence level: an interval that never closes is no rule
COUNT_OR_ZERO = Range(0.0, integer=True)    # how many, where 0 means none (or: no cap)


@dataclass(frozen=True)
class ThresholdSpec:
    default: float
    unit: str
    help: str
    range: Range = NON_NEGATIVE


@dataclass(frozen=True)
class ThresholdValue:
    """A threshold as a check uses it: the number and where it came from."""

    name: str
    value: float
    unit: str
    source: str  # default | ini | yaml:<file> | env:<VAR> | cli


def threshold_problem(name: str, value: Any) -> str | None:
    """Why `value` cannot be threshold `name` (unknown name, not finite, out of range), or None."""
    if name not in THRESHOLDS:
        return f"unknown threshold '{name}' (known: {', '.join(sorted(THRESHOLDS))})"
    problem = THRESHOLDS[name].range.problem(value)
    return f"{name} {problem}" if problem else None


def pair_problems(values: dict[str, float]) -> list[str]:
    """Thresholds that contradict each other (a band whose lower edge is above its upper edge)."""
    low, high = values["gpu_utilization_min"], values["gpu_utilization_max"]
    if low > high:
        return [f"gpu_utilization_min ({low:g}) is above gpu_utilization_max ({high:g})"]
    return []


THRESHOLDS: dict[str, ThresholdSpec] = {
    "success_rate_min": ThresholdSpec(0.999, "ratio", "lowest acceptable share of successful requests", RATIO),
    "metrics_scrape_timeout_s": ThresholdSpec(5.0, "s", "longest acceptable time to answer a metrics scrape", POSITIVE),
    "queue_delay_budget_fraction": ThresholdSpec(0.8, "ratio", "largest share of a model's p99 budget its max_queue_delay may take", RATIO),
    "gpu_memory_used_max_fraction": ThresholdSpec(0.9, "ratio", "highest GPU memory use per GPU once every model is loaded", RATIO),
    "cpu_memory_used_max_fraction": ThresholdSpec(0.9, "ratio", "highest host memory use once every model is loaded", RATIO),
    "attestation_max_age_days": ThresholdSpec(90.0, "days", "oldest acceptable runbook, disaster-recovery or training record (OPS-1, OPS-3, OPS-4)", NON_NEGATIVE),
    "capacity_headroom": ThresholdSpec(0.3, "ratio", "spare capacity planned above the declared peak rate (OPS-2)", NON_NEGATIVE),
    "tls_cert_expiry_warning_days": ThresholdSpec(30.0, "days", "a server certificate expiring sooner is a warning (SEC-2)", NON_NEGATIVE),
    "malformed_oversize_payload_mib": ThresholdSpec(80.0, "MiB", "size of the oversize request SEC-3 sends; a server should refuse it", POSITIVE),
    "queue_p95_max_ms": ThresholdSpec(50.0, "ms", "highest acceptable P95 queue time per model (summaries on)", POSITIVE),
    # streaming (decoupled) models: checks/test_streaming.py, docs/streaming.md
    "streaming_ttft_p99_ms": ThresholdSpec(1000.0, "ms", "PERF-1 streaming: p99 time to first token without a ttft_p99_ms SLO", POSITIVE),
    "streaming_itl_p99_ms": ThresholdSpec(200.0, "ms", "PERF-1 streaming: p99 inter-token latency without an itl_p99_ms SLO", POSITIVE),
    "streaming_min_output_tokens_per_s": ThresholdSpec(0.0, "tokens/s", "PERF-1 streaming: lowest output token throughput without a min_output_tokens_per_s SLO (0: none)", NON_NEGATIVE),
    "streaming_concurrency": ThresholdSpec(8, "streams", "PERF-1/PERF-3 streaming: concurrent streams (closed loop, one request in flight each)", COUNT),
    "streaming_max_tokens": ThresholdSpec(32, "tokens", "output tokens each streaming request asks for", COUNT),
    "streaming_duration_s": ThresholdSpec(6.0, "s", "PERF-1 streaming: length of the measurement after its load_warmup_s warm-up (longer while a rule is undecided, up to load_max_windows x load_window_s)", POSITIVE),
    "streaming_curve_max_concurrency": ThresholdSpec(16, "streams", "PERF-2 streaming: highest concurrency of the tokens/s and TTFT curve", COUNT),
    "streaming_curve_point_s": ThresholdSpec(3.0, "s", "PERF-2 streaming: measurement per curve point (longer while the point is undecided, up to load_max_windows x load_window_s)", POSITIVE),
    "streaming_min_requests": ThresholdSpec(10, "requests", "PERF-1/PERF-2 streaming: fewest completed requests for a measurement (a curve point) to count", COUNT),
    "streaming_final_deadline_s": ThresholdSpec(10.0, "s", "a streaming request without its final response this long after its send is stuck", POSITIVE),
    "streaming_soak_s": ThresholdSpec(30.0, "s", "PERF-3 streaming: length of the stream soak (0: off)", NON_NEGATIVE),
    "streaming_memory_growth_max_mb": ThresholdSpec(64.0, "MB", "PERF-3 streaming: highest growth of server memory (RSS) over the stream soak", NON_NEGATIVE),
    "streaming_cancel_recovery_max_s": ThresholdSpec(10.0, "s", "PERF-4 streaming: longest time after cancelling streams mid-generation until every instance serves", POSITIVE),
    "streaming_ttft_agreement_ms": ThresholdSpec(50.0, "ms", "MON-1 streaming: largest gap between the server's first-response median and the client's TTFT median", NON_NEGATIVE),
    # PERF-3, the soak (docs/soak.md)
    "soak_rate_fraction": ThresholdSpec(0.5, "ratio", "share of PERF-2's highest throughput within SLO that the soak drives per model", FRACTION),
    "soak_default_rate_infer_s": ThresholdSpec(10.0, "infer/s", "soak rate per model when neither PERF-2 nor soak.rate gives one", POSITIVE),
    "soak_p99_drift_ratio_max": ThresholdSpec(1.5, "ratio", "highest p99 of the soak's last quarter over its first quarter", POSITIVE),
    "soak_p99_drift_min_ms": ThresholdSpec(5.0, "ms", "a p99 rise smaller than this is not drift, whatever the ratio", NON_NEGATIVE),
    "soak_server_memory_slope_max_mb_h": ThresholdSpec(20.0, "MB/h", "highest growth of server memory over the soak (least-squares slope)", NON_NEGATIVE),
    "soak_gpu_memory_slope_max_mb_h": ThresholdSpec(20.0, "MB/h", "highest growth of GPU memory over the soak (least-squares slope)", NON_NEGATIVE),
    "soak_leak_min_duration_s": ThresholdSpec(600.0, "s", "a soak shorter than this (after warm-up) reports memory growth as a warning: too short to tell a leak from warm-up", NON_NEGATIVE),
    "soak_leak_min_growth_mb": ThresholdSpec(32.0, "MB", "fitted memory growth below this is noise, not a leak, whatever the slope", NON_NEGATIVE),
    "soak_pending_growth_max": ThresholdSpec(8.0, "requests", "highest fitted growth of pending requests over the soak", NON_NEGATIVE),
    "soak_runner_memory_slope_max_mb_h": ThresholdSpec(20.0, "MB/h", "highest growth of the runner's own RSS (a warning: it questions the measurement)", NON_NEGATIVE),
    "soak_dropped_max": ThresholdSpec(0.01, "ratio", "highest share of scheduled requests the runner may fail to send on time (a warning)", RATIO),
    "soak_evidence_max_age_h": ThresholdSpec(168.0, "h", "oldest soak evidence (--triton-soak-evidence) PERF-3 accepts, counted from the end of that soak", POSITIVE),
    # load engine: measurement windows, stability (perf_analyzer) and validity (MLPerf LoadGen)
    "load_warmup_s": ThresholdSpec(1.0, "s", "traffic before the first measurement window, excluded from every number", NON_NEGATIVE),
    "load_rewarmup_s": ThresholdSpec(0.25, "s", "the warm-up instead, for a model this run already drove since the server last changed: its first requests are behind it, only the new load's queues fill", NON_NEGATIVE),
    "load_window_s": ThresholdSpec(0.5, "s", "length of one measurement window", POSITIVE),
    "load_stability_windows": ThresholdSpec(3, "windows", "how many last windows must agree for a measurement to be stable", COUNT),
    "load_stability_tolerance": ThresholdSpec(0.10, "ratio", "largest max/min spread of throughput and mean latency across those windows", NON_NEGATIVE),
    "load_max_windows": ThresholdSpec(24, "windows", "windows measured at most (the window budget): a measurement stops earlier once its rules are decided, or once stable and valid when it judges none", COUNT),
    "load_confidence": ThresholdSpec(0.95, "ratio", "confidence level of the intervals a rule is decided on: decided once the interval lies on one side of the threshold, else too close to call at the window budget", CONFIDENCE),
    "load_min_duration_s": ThresholdSpec(2.0, "s", "validity: shortest span of the reported windows", NON_NEGATIVE),
    "load_min_requests": ThresholdSpec(200, "requests", "validity: fewest completed requests in the reported windows", COUNT),
    "load_request_timeout_s": ThresholdSpec(10.0, "s", "a load request still unanswered this long after it was sent counts as failed (timeout) at a window's end", POSITIVE),
    "load_stall_ratio": ThresholdSpec(0.25, "ratio", "stall: a load window completing fewer requests than this share of its neighbours' median", FRACTION),
    "load_stall_min_s": ThresholdSpec(0.5, "s", "stall: the run of such windows must withhold at least this many seconds of its neighbours' traffic; a shorter hiccup of a busy client host is noise", NON_NEGATIVE),
    "client_lag_max_ms": ThresholdSpec(50.0, "ms", "the load generator fell behind in a window whose event-loop lag (a 10 ms timer's overshoot) exceeds this: its latency rules are not judged there (INCOMPLETE, not FAIL)", POSITIVE),
    "client_late_send_max": ThresholdSpec(0.05, "ratio", "the load generator fell behind in a window where more than this share of the scheduled requests went out over 5 ms late (or were dropped late)", RATIO),
    "client_cpu_saturation": ThresholdSpec(0.9, "cores", "a throughput measured while the load generator used this much CPU per load process is a lower bound, limited by the load generator", POSITIVE),
    "health_probe_span_s": ThresholdSpec(1.5, "s", "after each load phase, how long every model's instances are probed with real requests", POSITIVE),
    "reload_failed_requests_max": ThresholdSpec(0, "requests", "requests that may fail while a model reloads or a new version rolls out under traffic", COUNT_OR_ZERO),
    "reload_serve_max_s": ThresholdSpec(30.0, "s", "longest time from a reload request until the reloaded (or new) version serves", POSITIVE),
    "instance_recovery_max_s": ThresholdSpec(30.0, "s", "longest time from the recovery action (unload + load) until every instance of the model answers", POSITIVE),
    "server_restart_max_s": ThresholdSpec(60.0, "s", "longest time from a server crash (SIGKILL) and restart until the first correct inference", POSITIVE),
    "shutdown_lost_requests_max": ThresholdSpec(0, "requests", "requests the server may take and then drop without an answer during a graceful shutdown (SIGTERM)", COUNT_OR_ZERO),
    "shutdown_ready_drop_max_s": ThresholdSpec(1.0, "s", "longest time from SIGTERM until readiness stops answering 200", POSITIVE),
    # PERF-5, regression against a baseline run (docs/report.md)
    "regression_capacity_drop_max": ThresholdSpec(0.10, "ratio", "PERF-5: largest fall of PERF-2's capacity within SLO against the baseline", RATIO),
    "regression_p50_rise_max": ThresholdSpec(0.20, "ratio", "PERF-5: largest rise of p50 latency at the target load against the baseline", NON_NEGATIVE),
    "regression_p99_rise_max": ThresholdSpec(0.20, "ratio", "PERF-5: largest rise of p99 latency at the target load against the baseline", NON_NEGATIVE),
    "regression_error_rate_rise_max": ThresholdSpec(0.001, "ratio", "PERF-5: largest rise of the error rate at the target load (absolute, 0.001 = 0.1 points)", RATIO),
    "regression_drift_rise_max": ThresholdSpec(0.25, "ratio", "PERF-5: largest rise of the soak's p99 drift ratio against the baseline", NON_NEGATIVE),
    "regression_memory_slope_rise_max_mb_h": ThresholdSpec(10.0, "MB/h", "PERF-5: largest rise of a soak memory slope against the baseline (absolute)", NON_NEGATIVE),
    "regression_recovery_rise_max": ThresholdSpec(0.50, "ratio", "PERF-5: largest rise of the worst fault-recovery time against the baseline", NON_NEGATIVE),
    "regression_recovery_floor_s": ThresholdSpec(1.0, "s", "PERF-5: a recovery-time rise smaller than this is timing noise, whatever the ratio", NON_NEGATIVE),
    "regression_noise_sigmas": ThresholdSpec(2.0, "sigmas", "PERF-5: a difference within this many combined standard errors of the two runs' windows is noise, not a change", NON_NEGATIVE),
    "regression_noise_default": ThresholdSpec(0.05, "ratio", "PERF-5: relative standard error assumed for a run that recorded no window spread", RATIO),
    # performance phase (PERF-1, PERF-2) and CFG-2
    "capacity_default_p99_ms": ThresholdSpec(100.0, "ms", "p99 budget that defines 'within SLO' for a model with no p99 SLO", POSITIVE),
    "perf_target_concurrency": ThresholdSpec(8, "requests", "PERF-1 closed-loop concurrency for a model with no min_throughput SLO", COUNT),
    "perf_throughput_ratio_min": ThresholdSpec(0.95, "ratio", "PERF-1: lowest achieved/offered throughput at the target load", RATIO),
    "curve_max_concurrency": ThresholdSpec(0, "requests", "PERF-2/CFG-2: cap on the swept concurrency (0: 2 x max_batch_size x instances)", COUNT_OR_ZERO),
    "curve_search_max_concurrency": ThresholdSpec(512, "requests", "PERF-2: highest concurrency the capacity search goes to past 2 x max_batch_size x instances; stopped there while still rising, the capacity is a lower bound", COUNT),
    "curve_min_gain": ThresholdSpec(0.05, "ratio", "PERF-2: throughput gain per doubling of concurrency below which throughput has stopped rising", RATIO),
    "curve_knee_fraction": ThresholdSpec(0.90, "ratio", "PERF-2: the knee is the first point reaching this share of the highest throughput", FRACTION),
    "curve_drop_tolerance": ThresholdSpec(0.10, "ratio", "PERF-2: largest throughput fall allowed between two points before the knee", RATIO),
    "batching_min_average_batch_size": ThresholdSpec(1.0, "requests", "CFG-2: average batch size at saturation must be above this", NON_NEGATIVE),
    "batching_preferred_fraction": ThresholdSpec(0.5, "ratio", "CFG-2: average batch must reach this share of the smallest preferred size", RATIO),
    "batching_queue_share_max": ThresholdSpec(0.40, "ratio", "CFG-2: largest share of server latency spent queued before advice is given", RATIO),
    "gpu_utilization_min": ThresholdSpec(0.70, "ratio", "GPU utilization under load: lower edge of the healthy band", RATIO),
    "gpu_utilization_max": ThresholdSpec(0.85, "ratio", "GPU utilization under load: upper edge of the healthy band", RATIO),
    # the deployment's manifests against this run's measurements (--triton-deployment; docs/deployment.md)
    "deployment_startup_margin": ThresholdSpec(0.5, "ratio", "the startup probe's budget must cover the measured start-to-ready time x (1 + this)", NON_NEGATIVE),
    "deployment_grace_margin_s": ThresholdSpec(5.0, "s", "terminationGracePeriodSeconds must cover preStop + the measured drain + this", NON_NEGATIVE),
    "deployment_memory_headroom": ThresholdSpec(0.2, "ratio", "the memory limit must be at least the measured peak RSS x (1 + this)", NON_NEGATIVE),
    "deployment_memory_horizon_h": ThresholdSpec(24.0, "h", "at the soak's memory slope the pod must not reach its memory limit sooner than this (the restart interval a team relies on)", POSITIVE),
    "deployment_cpu_headroom": ThresholdSpec(0.2, "ratio", "the CPU limit must be at least the CPU used at the measured capacity x (1 + this)", NON_NEGATIVE),
    "deployment_shm_min_mib": ThresholdSpec(64.0, "MiB", "smallest sizeLimit of the memory-backed /dev/shm of a pod serving python backend models (a container's default /dev/shm is 64 MiB)", POSITIVE),
    # fleet (CFG-5, PERF-6, PERF-4 replica death; docs/fleet.md)
    "fleet_spread_max_deviation": ThresholdSpec(0.25, "ratio", "PERF-6: largest relative deviation of a replica's share of the traffic from its expected share (|share - expected| / expected)", NON_NEGATIVE),
    "fleet_capacity_ratio_min": ThresholdSpec(0.80, "ratio", "PERF-6: lowest fleet capacity through the balancer / the sum of the replicas' capacities measured one by one", RATIO),
    "fleet_death_lost_fraction_max": ThresholdSpec(0.01, "ratio", "PERF-4 replica death: largest share of the requests after the kill that may fail or be dropped", RATIO),
    "fleet_death_reroute_max_s": ThresholdSpec(10.0, "s", "PERF-4 replica death: longest time from the kill until the balancer stops sending requests that fail", NON_NEGATIVE),
}
