"""Pipelines: ensembles and BLS models, the models they are made of, and where their time goes.

An ensemble (`platform: "ensemble"`) names its steps in `ensemble_scheduling.step[]`; a BLS model
calls other models from its own code, so the team declares them (`models.bls_composing`, as
perf_analyzer's `--bls-composing-models`). A load measurement of a pipeline reads each composing
model's statistics over the same windows (as perf_analyzer does for ensembles) and names the step
with the largest queue + compute time per request: the bottleneck.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

COMPUTE_STAGES = ("compute_input", "compute_infer", "compute_output")


def is_ensemble(config: Mapping[str, Any]) -> bool:
    return config.get("platform") == "ensemble" or bool(config.get("ensemble_scheduling"))


def ensemble_steps(config: Mapping[str, Any]) -> list[str]:
    """The models an ensemble's steps call, in step order, each once."""
    steps = (config.get("ensemble_scheduling") or {}).get("step") or []
    return list(dict.fromkeys(step.get("model_name", "") for step in steps if step.get("model_name")))


def composing_models(model: str, config_of: Callable[[str], Mapping[str, Any]],
                     bls_composing: Mapping[str, list[str]] | None = None) -> list[str]:
    """Every model `model` runs through: an ensemble's steps (and their steps, for nested
    ensembles), or the models a BLS model is declared to call; empty for a plain model. A step
    whose config cannot be read is still listed (its statistics will say why they are missing)."""
    found: list[str] = []

    def visit(name: str, seen: frozenset[str]) -> None:
        try:
            config = config_of(name)
        except Exception:  # a missing step model: listed by its caller, nothing below it
            return
        children = ensemble_steps(config) if is_ensemble(config) else list((bls_composing or {}).get(name, []))
        for child in children:
            if child in seen:
                continue
            if child not in found:
                found.append(child)
            visit(child, seen | {child})

    visit(model, frozenset({model}))
    return found


def pipeline_kind(model: str, config: Mapping[str, Any], bls_composing: Mapping[str, list[str]] | None) -> str | None:
    """'ensemble', 'BLS' (declared in models.bls_composing), or None for a plain model."""
    if is_ensemble(config):
        return "ensemble"
    return "BLS" if (bls_composing or {}).get(model) else None


def composing_of_any(models: list[str], config_of: Callable[[str], Mapping[str, Any]],
                     bls_composing: Mapping[str, list[str]] | None = None) -> set[str]:
    """The models that some model of `models` runs through (a step of an ensemble, a callee of a BLS model)."""
    return {step for model in models for step in composing_models(model, config_of, bls_composing)}


@dataclass(frozen=True)
class StepTime:
    """One composing model's server-side time per request over a measurement (microseconds)."""

    model: str
    requests: int
    queue_us: float | None
    compute_us: float | None
    failed: int = 0

    @property
    def total_us(self) -> float:
        return (self.queue_us or 0.0) + (self.compute_us or 0.0)

    def describe(self) -> str:
        return (f"{self.model}: queue {_us(self.queue_us)} + compute {_us(self.compute_us)} per request "
                f"({self.requests} requests)")


def step_times(server_window: Any, steps: list[str]) -> list[StepTime]:
    """Each composing model's queue and compute time per request from a ServerWindow (deltas of
    /v2/models/M/stats over the measurement); steps without statistics are left out."""
    times = []
    for step in steps:
        window = server_window.models.get(step) if server_window is not None else None
        if window is None:
            continue
        compute = [window.stage_us.get(stage) for stage in COMPUTE_STAGES]
        known = [c for c in compute if c is not None]
        times.append(StepTime(step, window.success + window.fail, window.stage_us.get("queue"),
                              sum(known) if known else None, window.fail))
    return times


def bottleneck(times: list[StepTime]) -> StepTime | None:
    """The step with the largest queue + compute time per request, among steps that served requests."""
    served = [t for t in times if t.requests > 0 and (t.queue_us is not None or t.compute_us is not None)]
    return max(served, key=lambda t: t.total_us) if served else None


def _us(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} us"


def step_failures(client: Any, steps: list[str]) -> dict[str, int]:
    """Each composing model's failed-request counter (summed over versions) from /v2/models/M/stats;
    a step whose statistics cannot be read is left out."""
    counts = {}
    for step in steps:
        try:
            stats = client.statistics(step).get("model_stats", [])
        except Exception:  # a step that is not loaded has no statistics: the lint names it
            continue
        counts[step] = sum(int(v.get("inference_stats", {}).get("fail", {}).get("count", 0)) for v in stats)
    return counts


def failures_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The steps whose failure counter rose between two step_failures() readings, by how much."""
    return {step: after[step] - before[step] for step in after if step in before and after[step] > before[step]}
