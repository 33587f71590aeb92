"""What a soak will do: duration, windows, warm-up, rate per model (and where it came from), limits.

Rate per model, first that applies: `soak.rates.<model>` in the YAML; `soak_rate_fraction` of the
highest throughput within SLO that PERF-2 published in this run (its `Capacity` facts),
divided by the number of models soaked together, since PERF-2 measured each alone;
`soak.rate` in the YAML; the conservative default `soak_default_rate_infer_s`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from ..errors import TritonReadyError
from ..facts import Capacity, Facts
from ..thresholds import THRESHOLDS, ThresholdValue
from ..yamlschema import Section, setting
from .duration import parse_duration

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


class PlanError(TritonReadyError, ValueError):
    """A soak setting that cannot work; the message names it and where it came from."""


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


@dataclass
class SoakPlan:
    duration_s: float
    window_s: float
    warmup_s: float
    models: list[str]
    rates: dict[str, float]  # requests per second, per model
    rate_sources: dict[str, str]
    journal_path: Path
    limits: dict[str, ThresholdValue] = field(default_factory=dict)
    duration_source: str = "default"

    @property
    def total_rate(self) -> float:
        return sum(self.rates.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "duration_s": self.duration_s, "duration_source": self.duration_source, "window_s": self.window_s,
            "warmup_s": self.warmup_s, "models": list(self.models), "rates": dict(self.rates),
            "rate_sources": dict(self.rate_sources), "journal_path": str(self.journal_path),
            "limits": {n: vars(t) for n, t in self.limits.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SoakPlan:
        return cls(
            data["duration_s"], data["window_s"], data["warmup_s"], list(data["models"]), dict(data["rates"]),
            dict(data.get("rate_sources", {})), Path(data.get("journal_path", JOURNAL_NAME)),
            {n: ThresholdValue(**t) for n, t in data.get("limits", {}).items()},
            data.get("duration_source", "default"),
        )


def soak_limits(settings) -> dict[str, ThresholdValue]:
    """The soak's thresholds: `thresholds:`/--triton-threshold first, then the YAML `soak:` section
    (key without the `soak_` prefix), then the default."""
    section = settings.section_model("soak")
    where = f"yaml:{settings.config_file} soak." if settings.config_file else "yaml soak."
    limits = {}
    for name in LIMIT_NAMES:
        value = settings.threshold(name)
        key = name.removeprefix("soak_")
        given = getattr(section, key)
        if value.source == "default" and given is not None:
            value = ThresholdValue(name, float(given), THRESHOLDS[name].unit, where + key)
        limits[name] = value
    limits["load_confidence"] = settings.threshold("load_confidence")  # the p99 drift's rank test
    return limits


def build_plan(settings, models: list[str], facts: Facts) -> SoakPlan:
    """The plan for this run; PlanError when a setting cannot work."""
    section = settings.section_model("soak")
    duration = float(settings.triton_soak)
    where = f"{settings.config_file}" if settings.config_file else "the YAML file"
    window = _seconds(section, "window", where)
    if window is None:
        window = min(MAX_AUTO_WINDOW_S, max(MIN_WINDOW_S, duration / WINDOWS_WANTED))
    if window < MIN_WINDOW_S:
        raise PlanError(f"soak.window in {where}: at least {MIN_WINDOW_S:g} s, got {window:g} s")
    if duration and window > duration:
        raise PlanError(f"soak.window in {where} ({window:g} s) is longer than the soak ({duration:g} s)")
    if duration / window > MAX_WINDOWS:
        raise PlanError(f"soak.window in {where} ({window:g} s) cuts a {duration:g} s soak into more than "
                        f"{MAX_WINDOWS} windows; use at least {duration / MAX_WINDOWS:g} s")
    warmup = _seconds(section, "warmup", where)
    if warmup is None:
        warmup = max(window, min(0.05 * duration, MAX_AUTO_WARMUP_S))
    if duration and warmup >= duration:
        raise PlanError(f"soak.warmup in {where} ({warmup:g} s) leaves nothing of a {duration:g} s soak")
    models = list(section.models or models)
    rates, sources = {}, {}
    capacity = facts.of(Capacity)
    fraction = settings.threshold("soak_rate_fraction")
    if fraction.source == "default" and section.rate_fraction is not None:
        fraction = ThresholdValue(fraction.name, float(section.rate_fraction), fraction.unit, "yaml soak.rate_fraction")
    default_rate = settings.threshold("soak_default_rate_infer_s")
    for model in models:
        pinned = section.rates.get(model)
        measured = capacity[model].max_throughput_within_slo_infer_s if model in capacity else None
        if pinned is not None:
            rates[model], sources[model] = float(pinned), f"yaml soak.rates.{model}"
        elif measured:
            # PERF-2 measured each model alone; soaked together they share the server, so the
            # fraction of capacity is split between them.
            sharing = len(models)
            rates[model] = float(measured) * fraction.value / sharing
            shared = f" / {sharing} models soaked together" if sharing > 1 else ""
            sources[model] = (f"{fraction.value:g} x {float(measured):.1f} infer/s{shared}, from the highest "
                              f"throughput within SLO that PERF-2 measured in this run (soak_rate_fraction from "
                              f"{fraction.source})")
        elif section.rate is not None:
            rates[model], sources[model] = float(section.rate), "yaml soak.rate"
        else:
            rates[model] = default_rate.value
            perf2 = ("PERF-2 found no throughput within SLO" if model in capacity
                     else "PERF-2 published no capacity")
            sources[model] = (f"conservative default of {default_rate.value:g} infer/s (soak_default_rate_infer_s "
                              f"from {default_rate.source}): {perf2} and soak.rate is not set")
        if rates[model] <= 0:
            raise PlanError(f"soak rate for {model} must be positive, got {rates[model]:g} ({sources[model]})")
    journal = Path(section.journal) if section.journal else Path(settings.readiness_report) / JOURNAL_NAME
    return SoakPlan(duration, window, warmup, models, rates, sources, journal, soak_limits(settings),
                    settings.sources.get("triton_soak", "default"))


def _seconds(section: SoakSection, key: str, where: str) -> float | None:
    if getattr(section, key) is None:
        return None
    try:
        return parse_duration(getattr(section, key))
    except ValueError as exc:
        raise PlanError(f"soak.{key} in {where}: {exc}") from None
