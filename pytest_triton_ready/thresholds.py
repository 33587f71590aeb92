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
    "queue_p95_max_ms": ThresholdSpec(50.0, "ms", "highest acceptable P95 queue time per model (summaries on)"),
    "gpu_memory_warn_ratio": ThresholdSpec(0.9, "ratio", "GPU memory use that draws a warning"),
    "gpu_utilization_target_min": ThresholdSpec(0.70, "ratio", "low end of the GPU utilization target under load"),
    "gpu_utilization_target_max": ThresholdSpec(0.85, "ratio", "high end of the GPU utilization target under load"),
}
