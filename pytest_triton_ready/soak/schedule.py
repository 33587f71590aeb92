"""What a soak will do: duration, windows, warm-up, rate per model (and where it came from), limits.

Rate per model, first that applies: `soak.rates.<model>` in the YAML; `soak_rate_fraction` of the
highest throughput within SLO that PERF-2 published in this run (its `Capacity` facts),
divided by the number of models soaked together, since PERF-2 measured each alone;
`soak.rate` in the YAML; the conservative default `soak_default_rate_infer_s`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..duration import parse_duration
from ..errors import TritonReadyError
from ..facts import Capacity, Facts
from ..thresholds import THRESHOLDS, ThresholdValue
from .schema import (
    JOURNAL_NAME,
    LIMIT_NAMES,
    MAX_AUTO_WARMUP_S,
    MAX_AUTO_WINDOW_S,
    MAX_WINDOWS,
    MIN_WINDOW_S,
    WINDOWS_WANTED,
    SoakSection,
)


class PlanError(TritonReadyError, ValueError):
    """A soak setting that cannot work; the message names it and where it came from."""


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
    for name in ("client_lag_max_ms", "client_late_send_max"):  # the runner's own health (load/client_health.py)
        limits[name] = settings.threshold(name)
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
        found = capacity.get(model)
        measured = found.max_throughput_within_slo_infer_s if found else None
        if pinned is not None:
            rates[model], sources[model] = float(pinned), f"yaml soak.rates.{model}"
        elif measured:
            # PERF-2 measured each model alone; soaked together they share the server, so the
            # fraction of capacity is split between them. The low end of the capacity's interval,
            # not its value: runs whose capacities differ inside their noise soak at about one rate.
            base, of = _capacity_base(found)
            sharing = len(models)
            rates[model] = base * fraction.value / sharing
            shared = f" / {sharing} models soaked together" if sharing > 1 else ""
            sources[model] = (f"{fraction.value:g} x {base:.1f} infer/s{shared}, {of} (soak_rate_fraction from "
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


def _capacity_base(found: Capacity) -> tuple[float, str]:
    """The throughput a soak's rate is a fraction of, and where it came from: the low end of
    PERF-2's capacity interval where it has one, else its value."""
    value = float(found.max_throughput_within_slo_infer_s)
    low = found.throughput_low_infer_s
    if low is not None and 0 < low <= value:
        return float(low), (f"the low end of the {found.level or 0.95:.0%} interval of the highest throughput within SLO "
                            f"that PERF-2 measured in this run ({value:.1f} infer/s)")
    return value, "the highest throughput within SLO that PERF-2 measured in this run (no interval)"
