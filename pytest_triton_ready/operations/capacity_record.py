"""OPS-2 onto a check: the declared peak and fleet read, PERF-2's capacity turned into a plan
(operations/capacity.py does the arithmetic), and every number of the plan recorded.

Three steps, each ending the check when it must: `record_declaration` (what the team must declare),
`plan_from_facts` (what PERF-2 must have measured), `record_plan` (the measurements and the verdict).
"""

from __future__ import annotations

from typing import Any

from ..facts import Capacity, Facts, StreamingCapacity
from ..record.recorder import CheckRecorder
from .capacity import FleetPlan, ModelPlan, measured_capacities, model_plan
from .schema import DeclaredCapacity, DeclaredFleet

PEAK_KEY = "operations.capacity.peak_rate"
FLEET_KEY = "operations.capacity.fleet"


def record_declaration(check: CheckRecorder, capacity: DeclaredCapacity, models_in_scope: list[str]) -> bool:
    """Findings for a plan the team has not declared fully: no peak, a model in scope without one,
    a peak that is not positive, no GPUs. True when the declaration can be planned from."""
    peaks, fleet = capacity.peak_rate, capacity.fleet or DeclaredFleet()
    if not peaks:
        check.finding(f"no capacity plan: declare each model's expected peak rate under {PEAK_KEY} (infer/s)",
                      rule=PEAK_KEY)
    for model in models_in_scope:
        if model not in peaks:
            check.finding(f"{model}: in scope but has no expected peak rate in {PEAK_KEY}", model=model, rule=PEAK_KEY)
    for model, rate in peaks.items():
        if rate <= 0:
            check.finding(f"{model}: peak rate {rate:g} infer/s must be positive", model=model, rule=PEAK_KEY)
    if fleet.gpus is None:
        check.finding(f"no fleet declared: set {FLEET_KEY}.gpus (and instances_per_gpu per model)", rule=FLEET_KEY)
    if check.errors:
        check.recommend("Declare operations.capacity: peak_rate per model (infer/s), fleet.gpus and "
                        "fleet.instances_per_gpu; docs/operations-security.md shows an example.")
        return False
    return True


def plan_from_facts(check: CheckRecorder, capacity: DeclaredCapacity, facts: Facts, headroom: float) -> FleetPlan | None:
    """The fleet plan from PERF-2's capacity facts, with its assumptions; INCOMPLETE when PERF-2
    measured nothing or not every declared model; None (after findings) when PERF-2 measured a
    model that has no declared peak."""
    peaks, fleet = capacity.peak_rate, capacity.fleet or DeclaredFleet()
    measured, unusable = measured_capacities(facts)
    for problem in unusable:
        check.finding(problem, severity="warning", rule="PERF-2")
    if not measured:
        check.incomplete(f"PERF-2 was not part of this run: no measured throughput within SLO ({Capacity.producer}, "
                         f"or {StreamingCapacity.producer} for decoupled models) to plan from")
    for model in sorted(set(measured) - set(peaks)):
        check.finding(f"{model}: PERF-2 measured it, but it has no expected peak rate in {PEAK_KEY}",
                      model=model, rule=PEAK_KEY)
    if check.errors:
        check.recommend("Declare an expected peak rate (infer/s) for every model the deployment serves.")
        return None
    unmeasured = sorted(m for m in peaks if m not in measured)
    if unmeasured:
        check.incomplete(f"PERF-2 measured no throughput within SLO for {', '.join(unmeasured)}")
    plans = []
    for model, rate in peaks.items():
        try:
            plans.append(model_plan(model, measured[model], rate, headroom, fleet.instances_per_gpu.get(model)))
        except ValueError as exc:
            check.incomplete(str(exc))
    plan = FleetPlan(plans, fleet.placement, fleet.gpus)
    plan.assumptions.append("throughput scales linearly with the number of instances")
    for model in plans:
        _note_assumptions(check, plan, model, measured[model.model], declared_per_gpu=model.model in fleet.instances_per_gpu)
    return plan


def _note_assumptions(check: CheckRecorder, plan: FleetPlan, model: ModelPlan, fact: dict[str, Any],
                      declared_per_gpu: bool) -> None:
    """What the plan for `model` assumes: a streaming capacity, a lower bound, instances as measured."""
    if fact.get("streaming"):
        plan.assumptions.append(
            f"{model.model}: decoupled; its capacity is the streaming curve's requests/s within the TTFT "
            f"SLO ({StreamingCapacity.producer.check_id}, {StreamingCapacity.producer.name}), each request "
            f"{fact.get('output_tokens_per_request') or '?'} output tokens on average: longer answers "
            "need proportionally more")
    if fact.get("lower_bound"):
        plan.assumptions.append(f"{model.model}: PERF-2's capacity is a lower bound (>= "
                                f"{model.measured_infer_s:.0f} infer/s; the sweep stopped at its maximum "
                                "concurrency), so the GPUs needed may be fewer")
        check.finding(f"{model.model}: planned with a lower bound of the capacity (>= "
                      f"{model.measured_infer_s:.0f} infer/s): the plan may ask for more GPUs than needed",
                      severity="info", model=model.model)
    if not declared_per_gpu:
        plan.assumptions.append(f"{model.model}: {model.instances_per_gpu} instance(s) per GPU, "
                                "as measured (fleet.instances_per_gpu not declared)")


def record_plan(check: CheckRecorder, plan: FleetPlan) -> None:
    """Every model's numbers, the rule that the declared fleet carries each model's peak plus
    headroom (shared placement) and that the fleet has the GPUs the plan needs."""
    check.evidence("capacity arithmetic", plan.arithmetic())
    shared = plan.placement == "shared"
    for p in plan.models:
        if not p.feasible:
            check.finding(f"{p.model}: PERF-2 found no load within its SLO, so no fleet carries its peak",
                          model=p.model)
            continue
        check.measure("measured throughput within SLO", round(p.measured_infer_s, 1), "infer/s", model=p.model)
        check.measure("throughput per instance", round(p.per_instance, 1), "infer/s", model=p.model)
        check.measure("required (peak x (1 + headroom))", round(p.required, 1), "infer/s", model=p.model)
        check.measure("instances needed", p.instances_needed, "instances", model=p.model)
        check.measure("GPUs needed", p.gpus_needed, "GPUs", model=p.model)
        if shared:
            check.measure("fleet capacity", round(p.fleet_capacity(plan.gpus_declared), 1), "infer/s",
                          model=p.model, threshold=round(p.required, 1), comparison=">=",
                          finding=f"{p.model}: {plan.gpus_declared} GPU(s) carry "
                                  f"{p.fleet_capacity(plan.gpus_declared):.1f} infer/s within SLO, "
                                  f"below the required {p.required:.1f} infer/s")
    if plan.feasible:
        check.measure("fleet GPUs needed", plan.gpus_needed, "GPUs", threshold=plan.gpus_declared,
                      finding=f"the plan needs {plan.gpus_needed} GPU(s) and the fleet declares {plan.gpus_declared}")
    if shared:
        check.chart("Required throughput and fleet capacity", "model", "infer/s",
                    {"required": [(i, p.required) for i, p in enumerate(plan.models)],
                     "fleet capacity": [(i, p.fleet_capacity(plan.gpus_declared)) for i, p in enumerate(plan.models)]},
                    kind="bar", markers=[{"x": i, "label": p.model} for i, p in enumerate(plan.models)])
    if check.errors:
        check.recommend(f"Grow operations.capacity.fleet.gpus to at least {plan.gpus_needed or '?'}, raise "
                        "instances per GPU where GPU memory allows, or lower the model's latency so more "
                        "throughput fits its SLO.")
