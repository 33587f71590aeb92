"""The YAML section `soak:` (PERF-3), declared once, with the bounds a soak plan keeps to."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from ..duration import parse_duration
from ..thresholds import THRESHOLDS
from ..yamlschema import Section, setting

JOURNAL_NAME = "soak-journal.jsonl"
MIN_WINDOW_S = 1.0
MAX_AUTO_WINDOW_S = 60.0
WINDOWS_WANTED = 20
MAX_AUTO_WARMUP_S = 600.0
MAX_WINDOWS = 10_000  # what the load engine keeps, and a bound on the runner's memory

# Limits the soak judges with: named thresholds, also settable in the YAML `soak:` section.
LIMIT_NAMES = ("success_rate_min", "soak_p99_drift_ratio_max", "soak_p99_drift_min_ms",
               "soak_server_memory_slope_max_mb_h", "soak_gpu_memory_slope_max_mb_h", "soak_leak_min_growth_mb",
               "soak_leak_min_duration_s",
               "soak_pending_growth_max", "soak_runner_memory_slope_max_mb_h", "soak_dropped_max",
               "soak_evidence_max_age_h")


def _duration_text(text: str) -> str:
    seconds = parse_duration(text)
    if not math.isfinite(seconds):
        raise ValueError(f"expected a finite duration, got {text!r}")
    return text


Duration = Annotated[str, AfterValidator(_duration_text)]


def _limit(name: str) -> Any:
    """A YAML key that sets one of the soak's named thresholds: same range, same help."""
    spec = THRESHOLDS[name]
    return setting(None, f"{spec.help} (threshold `{name}`, default {spec.default:g})", unit=spec.unit,
                   **spec.range.field())


class SoakSection(Section):
    """`soak:` (PERF-3). The limits are named thresholds; `thresholds:` and --triton-threshold
    outrank the value given here."""

    duration: Duration | None = setting(None, "soak length, as --triton-soak (90s, 30m, 24h; 0 = off)")
    window: Duration | None = setting(None, f"one judged window (default: duration / {WINDOWS_WANTED}, "
                                            f"{MIN_WINDOW_S:g} s to {MAX_AUTO_WINDOW_S:g} s)")
    warmup: Duration | None = setting(None, "traffic before the first judged window (default: the larger of one "
                                            "window and 5% of the duration, at most 10 min)")
    rate: float | None = setting(None, "rate per model when PERF-2 measured no capacity", unit="infer/s", gt=0)
    rates: dict[str, Annotated[float, Field(gt=0)]] = setting(
        dict, "pinned rate per model (outranks everything)", unit="infer/s")
    models: list[str] | None = setting(None, "models to soak (default: every READY model in scope)")
    journal: str | None = setting(None, f"the journal file (default: {JOURNAL_NAME} in the report directory)")
    evidence: str | None = setting(None, "a nightly soak's readiness.json (or its directory or journal) that "
                                         "judges the leak rule, as --triton-soak-evidence")
    evidence_max_age_h: float | None = _limit("soak_evidence_max_age_h")
    rate_fraction: float | None = _limit("soak_rate_fraction")
    success_rate_min: float | None = _limit("success_rate_min")
    p99_drift_ratio_max: float | None = _limit("soak_p99_drift_ratio_max")
    p99_drift_min_ms: float | None = _limit("soak_p99_drift_min_ms")
    server_memory_slope_max_mb_h: float | None = _limit("soak_server_memory_slope_max_mb_h")
    gpu_memory_slope_max_mb_h: float | None = _limit("soak_gpu_memory_slope_max_mb_h")
    leak_min_growth_mb: float | None = _limit("soak_leak_min_growth_mb")
    leak_min_duration_s: float | None = _limit("soak_leak_min_duration_s")
    pending_growth_max: float | None = _limit("soak_pending_growth_max")
    runner_memory_slope_max_mb_h: float | None = _limit("soak_runner_memory_slope_max_mb_h")
    dropped_max: float | None = _limit("soak_dropped_max")
