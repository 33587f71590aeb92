"""OPS-2 capacity arithmetic: from PERF-2's highest throughput within SLO to instances and GPUs.

For each model:

    per instance     = measured throughput within SLO / instances it was measured with
    required         = declared peak rate x (1 + headroom)
    instances needed = ceil(required / per instance)
    GPUs needed      = ceil(instances needed / instances per GPU)

The fleet's GPUs either each serve every model (placement `shared`, the usual Triton replica: the
fleet needs the largest of the models' GPU counts, and each model's fleet capacity is
GPUs x instances per GPU x per instance) or are split between models (placement `dedicated`: the
fleet needs the sum). Throughput is assumed to scale linearly with instances; that is the model's
main assumption and the report says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..facts import Capacity, CapacityPlan, Facts, StreamingCapacity

PLACEMENTS = ("shared", "dedicated")
FACT_KEYS = ("max_throughput_within_slo_infer_s", "instances")


@dataclass
class ModelPlan:
    """The arithmetic for one model."""

    model: str
    peak_rate: float
    headroom: float
    measured_infer_s: float
    measured_instances: int
    instances_per_gpu: int
    slo_p99_ms: float | None = None
    measured_p99_ms: float | None = None
    measured_concurrency: int | None = None
    latency_label: str = "p99"  # what measured_p99_ms is: "TTFT p99" for a streaming model

    @property
    def per_instance(self) -> float:
        return self.measured_infer_s / self.measured_instances

    @property
    def required(self) -> float:
        return self.peak_rate * (1 + self.headroom)

    @property
    def feasible(self) -> bool:
        return self.measured_infer_s > 0

    @property
    def instances_needed(self) -> int | None:
        return math.ceil(self.required / self.per_instance) if self.feasible else None

    @property
    def gpus_needed(self) -> int | None:
        needed = self.instances_needed
        return math.ceil(needed / self.instances_per_gpu) if needed is not None else None

    def fleet_capacity(self, gpus: int) -> float:
        """Throughput within SLO of `gpus` GPUs that each run this model's instances."""
        return gpus * self.instances_per_gpu * self.per_instance

    def arithmetic(self) -> list[str]:
        slo = f" (SLO p99 {self.slo_p99_ms:g} ms" if self.slo_p99_ms else " ("
        slo += f", measured {self.latency_label} {self.measured_p99_ms:g} ms" if self.measured_p99_ms is not None else ""
        slo += f", concurrency {self.measured_concurrency}" if self.measured_concurrency else ""
        slo = slo + ")" if slo != " (" else ""
        lines = [
            f"{self.model}: measured {self.measured_infer_s:.1f} infer/s within SLO on {self.measured_instances} "
            f"instance(s){slo}",
        ]
        if not self.feasible:
            lines.append("  no load met the SLO: no number of instances carries the peak")
            return lines
        lines += [
            f"  per instance     = {self.measured_infer_s:.1f} / {self.measured_instances} = {self.per_instance:.1f} infer/s",
            f"  required         = peak {self.peak_rate:g} infer/s x (1 + headroom {self.headroom:g}) = {self.required:.1f} infer/s",
            f"  instances needed = ceil({self.required:.1f} / {self.per_instance:.1f}) = {self.instances_needed}",
            f"  GPUs needed      = ceil({self.instances_needed} / {self.instances_per_gpu} instance(s) per GPU) = {self.gpus_needed}",
        ]
        return lines


@dataclass
class FleetPlan:
    """Every model's arithmetic and the fleet's total."""

    models: list[ModelPlan]
    placement: str
    gpus_declared: int | None
    assumptions: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return all(m.feasible for m in self.models)

    @property
    def gpus_needed(self) -> int | None:
        if not self.models or not self.feasible:
            return None
        counts = [m.gpus_needed or 0 for m in self.models]
        return max(counts) if self.placement == "shared" else sum(counts)

    @property
    def carries_peak(self) -> bool:
        needed = self.gpus_needed
        return needed is not None and self.gpus_declared is not None and needed <= self.gpus_declared

    def arithmetic(self) -> str:
        lines: list[str] = []
        for plan in self.models:
            lines += plan.arithmetic()
        rule = "largest of the models (each GPU serves every model)" if self.placement == "shared" else \
            "sum over the models (each GPU serves one model)"
        needed = self.gpus_needed
        lines.append(f"fleet ({self.placement} placement): GPUs needed = {rule} = "
                     f"{needed if needed is not None else 'none suffices'}")
        if self.gpus_declared is not None:
            verdict = "carries the peak" if self.carries_peak else "does NOT carry the peak"
            lines.append(f"fleet declared: {self.gpus_declared} GPU(s) -> {verdict}")
        lines += [f"assumption: {a}" for a in self.assumptions]
        return "\n".join(lines)

    def to_fact(self) -> CapacityPlan:
        """What OPS-2 leaves in the run's facts."""
        return CapacityPlan(
            placement=self.placement,
            gpus_declared=self.gpus_declared,
            gpus_needed=self.gpus_needed,
            carries_peak=self.carries_peak,
            models={m.model: {"required_infer_s": m.required, "per_instance_infer_s": m.per_instance,
                              "instances_needed": m.instances_needed, "gpus_needed": m.gpus_needed}
                    for m in self.models},
        )


def model_plan(model: str, fact: dict[str, Any], peak_rate: float, headroom: float,
               instances_per_gpu: int | None) -> ModelPlan:
    """One model's plan from PERF-2's fact; `instances_per_gpu` defaults to the instances measured
    (the server under test counts as one GPU's worth). Raises ValueError on an unusable fact."""
    missing = [k for k in FACT_KEYS if fact.get(k) is None]
    if missing:
        raise ValueError(f"PERF-2's capacity fact for {model} lacks {', '.join(missing)}")
    instances = int(fact["instances"])
    if instances < 1:
        raise ValueError(f"PERF-2's capacity fact for {model} says {instances} instances")
    return ModelPlan(
        model=model,
        peak_rate=float(peak_rate),
        headroom=float(headroom),
        measured_infer_s=float(fact["max_throughput_within_slo_infer_s"]),
        measured_instances=instances,
        instances_per_gpu=int(instances_per_gpu or instances),
        slo_p99_ms=fact.get("slo_p99_ms"),
        measured_p99_ms=fact.get("p99_ms"),
        measured_concurrency=fact.get("concurrency"),
        latency_label=fact.get("latency_label") or "p99",
    )


STREAMING_FACT_KEYS = ("max_requests_per_s_within_slo", "instances")


def from_streaming_capacity(model: str, fact: dict[str, Any]) -> dict[str, Any]:
    """PERF-2's streaming capacity (checks/test_streaming.py, `StreamingCapacity`) in the
    plan's terms: a streamed request is one inference, so the capacity is the requests/s that the
    curve's best point within the TTFT SLO completed (each asking for the curve's token budget);
    `p99_ms` is that point's TTFT p99. Raises ValueError on a fact that lacks them."""
    missing = [k for k in STREAMING_FACT_KEYS if fact.get(k) is None]
    if missing:
        raise ValueError(f"PERF-2's streaming capacity fact for {model} lacks {', '.join(missing)}")
    return {"max_throughput_within_slo_infer_s": float(fact["max_requests_per_s_within_slo"]),
            "p99_ms": fact.get("ttft_p99_ms"), "concurrency": fact.get("concurrency"),
            "instances": int(fact["instances"]), "slo_p99_ms": None, "lower_bound": bool(fact.get("lower_bound")),
            "streaming": True, "latency_label": "TTFT p99",
            "output_tokens_per_request": fact.get("output_tokens_per_request"),
            "max_output_tokens_per_s_within_slo": fact.get("max_output_tokens_per_s_within_slo")}


def measured_capacities(facts: Facts) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(every model's measured capacity for the plan, problems): PERF-2's unary `Capacity`, and
    for decoupled models the streaming curve's (`StreamingCapacity`, converted by
    `from_streaming_capacity`); a streaming fact that cannot be used is left out, and said why."""
    measured = {model: fact.to_json() for model, fact in facts.of(Capacity).items()}
    problems = []
    for model, fact in facts.of(StreamingCapacity).items():
        if model not in measured:
            try:
                measured[model] = from_streaming_capacity(model, fact.to_json())
            except ValueError as exc:
                problems.append(str(exc))
    return measured, problems
