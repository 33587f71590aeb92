"""What the performance checks need to know about a model: batching, instances, its latency
budget (the SLO's p99, else the named default) and its target load."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from ..server.models import instance_count
from ..yamlschema import Section, setting

DEFAULT_QUEUE_DELAYS_US = [0, 100, 500, 2000, 10000]


class PerformanceSection(Section):
    """`performance:` (PERF-1, PERF-2, CFG-2)."""

    tune_batching: bool | None = setting(None, "as --triton-tune-batching")
    tune_queue_delays_us: list[Annotated[int, Field(ge=0)]] = setting(
        lambda: list(DEFAULT_QUEUE_DELAYS_US), "max_queue_delay_microseconds values CFG-2 tries with "
        "--triton-tune-batching", unit="µs", min_length=1)


@dataclass(frozen=True)
class ModelProfile:
    model: str
    max_batch_size: int
    instances: int
    dynamic_batching: dict[str, Any] | None
    sequence: bool
    budget_p99_ms: float
    budget_source: str  # "slo" or "default threshold capacity_default_p99_ms"
    slo_p99_ms: float | None
    min_throughput: float | None
    pipeline: str | None = None  # "ensemble" or "BLS" (server/pipelines.py)
    steps: tuple[str, ...] = ()  # the models an ensemble or BLS model runs through


    @property
    def preferred_batch_sizes(self) -> list[int]:
        return [int(x) for x in (self.dynamic_batching or {}).get("preferred_batch_size", []) or []]

    @property
    def max_queue_delay_us(self) -> int:
        return int((self.dynamic_batching or {}).get("max_queue_delay_microseconds", 0) or 0)

    @property
    def saturation_concurrency(self) -> int:
        """2 x max_batch_size x instances: the rule of thumb for a saturated server."""
        return 2 * max(1, self.max_batch_size) * self.instances


def profile(settings: Any, model: str, config: dict[str, Any],
            config_of: Callable[[str], dict[str, Any]] | None = None) -> ModelProfile:
    """The model's profile; `config_of` (a model's config by name) finds an ensemble's nested steps."""
    from ..server.pipelines import composing_models, pipeline_kind

    bls = getattr(settings, "bls_composing", {}) or {}
    steps = composing_models(model, config_of or (lambda name: config if name == model else {}), bls)
    slo = settings.slo_for(model)
    default = settings.threshold("capacity_default_p99_ms")
    budget, source = (slo.p99_ms, "slo") if slo.p99_ms is not None else (
        default.value, f"default threshold capacity_default_p99_ms ({default.source})")
    return ModelProfile(
        model, int(config.get("max_batch_size", 0) or 0), instance_count(config),
        config.get("dynamic_batching") or None, config.get("sequence_batching") is not None, budget, source, slo.p99_ms, slo.min_throughput,
        pipeline_kind(model, config, bls), tuple(steps),
    )

