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
    "gpu_memory_warn_ratio": ThresholdSpec(0.9, "ratio", "GPU memory use that draws a warning"),
    "gpu_utilization_target_min": ThresholdSpec(0.70, "ratio", "low end of the GPU utilization target under load"),
    "gpu_utilization_target_max": ThresholdSpec(0.85, "ratio", "high end of the GPU utilization target under load"),
}
