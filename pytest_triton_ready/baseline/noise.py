"""PERF-5's own measurements: the noise of this run's key numbers and the repeats that confirm or
clear a regression.

A unary model is measured once more at PERF-2's capacity point: the spread of its windows is the
noise of throughput, p50 and p99, and its throughput (when still within the SLO) is the repeat of
the capacity. A decoupled model has no windows: STREAMING_REPEATS streaming measurements at
PERF-2's best concurrency give the noise (their spread) and the repeat of the token capacity
(their mean). A p50/p99 regression is measured again at PERF-1's target load.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..facts import Capacity, Facts, StreamingCapacity, TargetLoad
from ..performance.streaming_rules import measurement_problem, streaming_slo
from ..record.recorder import CheckRecorder
from ..server.models import config_digest
from .keynumbers import CONFIG_DIGEST, NOISE_NAMES

STREAMING_REPEATS = 3


def relative_standard_error(values: Iterable[float | None]) -> float | None:
    """Standard error of the values' mean, relative to it: the noise of the run's number."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if len(values) < 2 or not statistics.fmean(values):
        return None
    return statistics.stdev(values) / abs(statistics.fmean(values)) / math.sqrt(len(values))


def window_noise(measurement: Any, model: str, windows_used: int) -> dict[str, float | None]:
    """The relative standard error of throughput, p50 and p99 over the measurement's last
    `windows_used` windows (all of them when 0), from `model`'s own share of each window."""
    windows = measurement.windows[-windows_used:] if windows_used > 0 else measurement.windows
    stats = [w.by_model.get(model, w.stats) for w in windows]
    return {"throughput": relative_standard_error([s.throughput_infer_s for s in stats]),
            "p50": relative_standard_error([s.p50_ms for s in stats]),
            "p99": relative_standard_error([s.p99_ms for s in stats])}


@dataclass
class NoiseMeasurement:
    """Per model: its config digest, the noise of each key number, and the repeats of the numbers
    a regression of which is measured again (capacity, token capacity, p50/p99)."""

    digests: dict[str, str] = field(default_factory=dict)
    noise: dict[str, dict[str, float | None]] = field(default_factory=dict)
    repeats: dict[str, dict[str, float]] = field(default_factory=dict)

    def add_noise_to(self, current: dict[str, dict[str, float]]) -> None:
        """Put each model's noise into this run's key numbers (`noise_<kind>`), where compare() reads it."""
        for model, spread in self.noise.items():
            current.setdefault(model, {}).update({f"noise_{k}": v for k, v in spread.items() if v is not None})


def _record_model(check: CheckRecorder, found: NoiseMeasurement, model: str, config: dict[str, Any]) -> None:
    found.digests[model] = config_digest(config)
    check.measure(CONFIG_DIGEST, found.digests[model], model=model)


def _record_noise(check: CheckRecorder, found: NoiseMeasurement, model: str) -> None:
    for kind, value in found.noise[model].items():
        if value is not None:
            check.measure(NOISE_NAMES[kind], round(value, 5), "ratio", model=model)


def measure_noise(triton: Any, load: Any, check: CheckRecorder, facts: Facts, unary: list[str],
                  decoupled: list[str]) -> NoiseMeasurement:
    """Every model's digest, noise and first repeats (capacity at PERF-2's point, token capacity)."""
    found = NoiseMeasurement()
    capacities = facts.of(Capacity)
    windows_used = int(check.threshold("load_stability_windows").value)
    for model in unary:
        _record_model(check, found, model, triton.client.model_config(model))
        measured = capacities.get(model)
        concurrency = int((measured.concurrency if measured else None) or check.threshold("perf_target_concurrency").value)
        measurement = load.measure(model, concurrency=concurrency, server_stats=False)
        check.measure("noise measured at concurrency", concurrency, "requests", model=model)
        found.noise[model] = window_noise(measurement, model, windows_used)
        budget = measured.slo_p99_ms if measured else None
        if measurement.trustworthy and (budget is None or measurement.stats.p99_ms <= budget):
            found.repeats[model] = {"capacity": measurement.stats.throughput_infer_s}  # still within SLO there
        _record_noise(check, found, model)
    streaming = facts.of(StreamingCapacity)
    for model in decoupled:
        _record_model(check, found, model, triton.client.model_config(model))
        found.noise[model], found.repeats[model] = streaming_noise(triton, check, model, streaming.get(model))
        _record_noise(check, found, model)
    return found


def repeat_at_target(load: Any, check: CheckRecorder, model: str, target: TargetLoad | None) -> dict[str, float]:
    """p50/p99 measured once more at PERF-1's target load (its concurrency or Poisson rate); empty
    (with a warning) when the repeat is not trustworthy."""
    if target is not None and target.rate:
        measurement = load.measure(model, rate=float(target.rate), poisson=True, server_stats=False)
        where = f"{target.rate:g} infer/s offered"
    else:
        concurrency = int((target.concurrency if target else None) or check.threshold("perf_target_concurrency").value)
        measurement = load.measure(model, concurrency=concurrency, server_stats=False)
        where = f"concurrency {concurrency}"
    check.measure("repeat at target load", where, model=model)
    if not measurement.trustworthy:
        check.finding(f"{model}: the repeat at the target load is not trustworthy ({measurement.problem()}); "
                      "the first measurement stands", severity="warning", model=model)
        return {}
    return {"p50": measurement.stats.p50_ms, "p99": measurement.stats.p99_ms}


def streaming_noise(triton: Any, check: CheckRecorder, model: str,
                    fact: StreamingCapacity | None) -> tuple[dict[str, float | None], dict[str, float]]:
    """({noise kind: relative standard error}, {key: repeat value}) from STREAMING_REPEATS streaming
    measurements of `model` at the concurrency of PERF-2's best point; a repeat counts for the
    token capacity only when every measurement is valid and its mean TTFT p99 within the SLO."""
    from ..load.streaming.requests import StreamingPlan
    from ..load.streaming.traffic import StreamingLoad
    from ..policy import guard_traffic, policy

    client = triton.client
    plan = StreamingPlan.from_metadata(model, client.model_metadata(model), client.model_config(model))
    concurrency = int((fact.concurrency if fact else None) or check.threshold("streaming_concurrency").value)
    check.measure("streaming noise measured at concurrency", concurrency, "streams", model=model)
    guard_traffic(policy(triton.settings), concurrency=concurrency)  # the attach ceiling, as unary repeats
    runs = [StreamingLoad(triton.endpoints.grpc_url, plan, headers=triton.settings.headers, concurrency=concurrency,
                          duration_s=check.threshold("streaming_curve_point_s").value, warmup_s=0.5,
                          max_tokens=int(check.threshold("streaming_max_tokens").value),
                          deadline_s=check.threshold("streaming_final_deadline_s").value).run().stats
            for _ in range(STREAMING_REPEATS)]
    noise = {"streaming_tokens": relative_standard_error([s.output_tokens_per_s for s in runs]),
             "streaming_ttft": relative_standard_error([s.ttft_ms["p99"] for s in runs]),
             "streaming_itl": relative_standard_error([s.itl_ms["p99"] for s in runs])}
    budget = streaming_slo(triton.settings, model)["ttft_p99_ms"].value
    refused = streaming_repeat_problem(check, runs, budget)
    if refused:
        check.finding(f"{model}: the streaming repeats do not stand for the token capacity ({refused})",
                      severity="warning", model=model)
        return noise, {}
    return noise, {"tokens_capacity": statistics.fmean(s.output_tokens_per_s for s in runs)}


def streaming_repeat_problem(check: CheckRecorder, runs: list[Any], ttft_budget_ms: float) -> str | None:
    """Why the streaming runs cannot repeat the token capacity: a run that is not a valid
    measurement, or a mean TTFT p99 above the SLO; None when they can."""
    problems = [p for s in runs if (p := measurement_problem(
        s.completed, s.success_rate, len(s.stuck), success_min=check.threshold("success_rate_min").value,
        min_requests=int(check.threshold("streaming_min_requests").value)))]
    if problems:
        return "; ".join(problems)
    ttft = [s.ttft_ms["p99"] for s in runs if s.ttft_ms["p99"] is not None]
    if not ttft or statistics.fmean(ttft) > ttft_budget_ms:
        return f"mean TTFT p99 above the {ttft_budget_ms:g} ms SLO"
    return None
