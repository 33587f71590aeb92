"""Phase "operations": what keeps a deployment running after go-live.

A runbook, a disaster-recovery drill and a team's training cannot be proven by a machine: they are
attestations in the YAML (`operations.attestations`), accepted when complete and recent. The
hot-update procedure is, in addition, exercised for real by the hot-reload experiment of this run.
The capacity plan is computed from PERF-2's measurements, never attested.
"""

import datetime as dt

import pytest

from pytest_triton_ready.facts import Capacity, HotReload, StreamingCapacity
from pytest_triton_ready.operations.attestations import review_attestation
from pytest_triton_ready.operations.capacity import FleetPlan, measured_capacities, model_plan
from pytest_triton_ready.operations.schema import DeclaredCapacity, DeclaredFleet


def _review(check, settings, kind):
    """Record one attestation; returns the review (its problems are already error findings)."""
    max_age = check.threshold("attestation_max_age_days")
    base_dir = settings.config_file.parent if settings.config_file else None
    review = review_attestation(settings.section_model("operations"), kind, max_age.value,
                                dt.datetime.now(dt.timezone.utc).date(), base_dir)
    if review.age_days is not None:
        check.measure(f"{review.label} age", review.age_days, "days", threshold=max_age,
                      finding=next((p for p in review.problems if "stale" in p), None))
    for problem in review.problems:
        if "stale" not in problem:
            check.finding(problem, rule=review.yaml_key)
    if review.present:
        check.evidence(review.label, review.summary())
    if not review.accepted:
        check.recommend(f"Record the {review.label} under {review.yaml_key} with link, owner and date "
                        f"(YYYY-MM-DD), and renew it at least every {max_age.value:g} days.")
    return review


@pytest.mark.triton_check("OPS-1")
def test_hot_update_procedure_documented_and_exercised(triton_settings, triton_facts, check):
    """The hot-update runbook is attested (link, owner, date within the age limit) AND the
    hot-reload experiment of this run passed: a model reloaded under load without failed requests."""
    review = _review(check, triton_settings, "hot_update_runbook")
    if triton_facts.get(HotReload) is None and not review.accepted:
        check.finding("the hot-reload experiment was not part of this run, so the procedure was not "
                      "exercised either", severity="info")
        return
    experiment = triton_facts.require(HotReload, because="the runbook is attested but the procedure was not exercised")
    passed = bool(experiment.passed)
    check.measure("hot-reload experiment passed", passed, threshold=True, comparison="==",
                  finding="the hot-reload experiment of this run failed: a model reload under load was not clean")
    if experiment.failed_requests is not None:
        check.measure("failed requests during the hot reload", experiment.failed_requests, "requests")
    if experiment.recovery_s is not None:
        check.measure("time until the reloaded model served", experiment.recovery_s, "s")
    if not passed:
        check.recommend("Read PERF-4's hot-reload timeline: load the new version next to the old one and "
                        "switch traffic only when it is READY, then rerun the experiment.")


@pytest.mark.triton_check("OPS-2")
def test_capacity_plan_carries_declared_peak(triton_settings, triton_facts, check):
    """The measured capacity carries the declared peak: for every model in the plan, PERF-2's highest
    throughput within SLO, scaled to the declared fleet, covers the peak rate plus headroom. For a
    decoupled model the capacity is the streaming curve's (test_streaming_tokens_and_ttft_curve):
    the requests/s completed at its best point within the TTFT SLO, a streamed request counting as
    one inference of the curve's token budget."""
    capacity = triton_settings.section_model("operations").capacity or DeclaredCapacity()
    peaks, fleet = capacity.peak_rate, capacity.fleet or DeclaredFleet()
    headroom = check.threshold("capacity_headroom")
    if not peaks:
        check.finding("no capacity plan: declare each model's expected peak rate under "
                      "operations.capacity.peak_rate (infer/s)", rule="operations.capacity.peak_rate")
    models_in_scope = triton_settings.triton_models or []
    for model in models_in_scope:
        if model not in peaks:
            check.finding(f"{model}: in scope but has no expected peak rate in operations.capacity.peak_rate",
                          model=model, rule="operations.capacity.peak_rate")
    for model, rate in peaks.items():
        if rate <= 0:
            check.finding(f"{model}: peak rate {rate:g} infer/s must be positive", model=model,
                          rule="operations.capacity.peak_rate")
    if fleet.gpus is None:
        check.finding("no fleet declared: set operations.capacity.fleet.gpus (and instances_per_gpu per model)",
                      rule="operations.capacity.fleet")
    if check.errors:
        check.recommend("Declare operations.capacity: peak_rate per model (infer/s), fleet.gpus and "
                        "fleet.instances_per_gpu; docs/operations-security.md shows an example.")
        return

    measured, unusable = measured_capacities(triton_facts)
    for problem in unusable:
        check.finding(problem, severity="warning", rule="PERF-2")
    if not measured:
        check.incomplete(f"PERF-2 was not part of this run: no measured throughput within SLO ({Capacity.producer}, "
                         f"or {StreamingCapacity.producer} for decoupled models) to plan from")
    for model in sorted(set(measured) - set(peaks)):
        check.finding(f"{model}: PERF-2 measured it, but it has no expected peak rate in "
                      "operations.capacity.peak_rate", model=model, rule="operations.capacity.peak_rate")
    if check.errors:
        check.recommend("Declare an expected peak rate (infer/s) for every model the deployment serves.")
        return
    unmeasured = sorted(m for m in peaks if m not in measured)
    if unmeasured:
        check.incomplete(f"PERF-2 measured no throughput within SLO for {', '.join(unmeasured)}")

    per_gpu = fleet.instances_per_gpu
    plans = []
    for model, rate in peaks.items():
        try:
            plans.append(model_plan(model, measured[model], rate, headroom.value, per_gpu.get(model)))
        except ValueError as exc:
            check.incomplete(str(exc))
    plan = FleetPlan(plans, fleet.placement, fleet.gpus)
    plan.assumptions.append("throughput scales linearly with the number of instances")
    for model_plan_ in plans:
        fact = measured[model_plan_.model]
        if fact.get("streaming"):
            plan.assumptions.append(
                f"{model_plan_.model}: decoupled; its capacity is the streaming curve's requests/s within the TTFT "
                f"SLO ({StreamingCapacity.producer.check_id}, {StreamingCapacity.producer.name}), each request "
                f"{fact.get('output_tokens_per_request') or '?'} output tokens on average: longer answers "
                "need proportionally more")
        if fact.get("lower_bound"):
            plan.assumptions.append(f"{model_plan_.model}: PERF-2's capacity is a lower bound (>= "
                                    f"{model_plan_.measured_infer_s:.0f} infer/s; the sweep stopped at its maximum "
                                    "concurrency), so the GPUs needed may be fewer")
            check.finding(f"{model_plan_.model}: planned with a lower bound of the capacity (>= "
                          f"{model_plan_.measured_infer_s:.0f} infer/s): the plan may ask for more GPUs than needed",
                          severity="info", model=model_plan_.model)
        if model_plan_.model not in per_gpu:
            plan.assumptions.append(f"{model_plan_.model}: {model_plan_.instances_per_gpu} instance(s) per GPU, "
                                    "as measured (fleet.instances_per_gpu not declared)")
    triton_facts.publish(plan.to_fact())
    check.evidence("capacity arithmetic", plan.arithmetic())

    for p in plans:
        if not p.feasible:
            check.finding(f"{p.model}: PERF-2 found no load within its SLO, so no fleet carries its peak",
                          model=p.model)
            continue
        check.measure("measured throughput within SLO", round(p.measured_infer_s, 1), "infer/s", model=p.model)
        check.measure("throughput per instance", round(p.per_instance, 1), "infer/s", model=p.model)
        check.measure("required (peak x (1 + headroom))", round(p.required, 1), "infer/s", model=p.model)
        check.measure("instances needed", p.instances_needed, "instances", model=p.model)
        check.measure("GPUs needed", p.gpus_needed, "GPUs", model=p.model)
        if fleet.placement == "shared":
            check.measure("fleet capacity", round(p.fleet_capacity(plan.gpus_declared), 1), "infer/s",
                          model=p.model, threshold=round(p.required, 1), comparison=">=",
                          finding=f"{p.model}: {plan.gpus_declared} GPU(s) carry "
                                  f"{p.fleet_capacity(plan.gpus_declared):.1f} infer/s within SLO, "
                                  f"below the required {p.required:.1f} infer/s")
    if plan.feasible:
        check.measure("fleet GPUs needed", plan.gpus_needed, "GPUs", threshold=plan.gpus_declared,
                      finding=f"the plan needs {plan.gpus_needed} GPU(s) and the fleet declares {plan.gpus_declared}")
    if fleet.placement == "shared":
        check.chart("Required throughput and fleet capacity", "model", "infer/s",
                    {"required": [(i, p.required) for i, p in enumerate(plans)],
                     "fleet capacity": [(i, p.fleet_capacity(plan.gpus_declared)) for i, p in enumerate(plans)]},
                    kind="bar", markers=[{"x": i, "label": p.model} for i, p in enumerate(plans)])
    if check.errors:
        check.recommend(f"Grow operations.capacity.fleet.gpus to at least {plan.gpus_needed or '?'}, raise "
                        "instances per GPU where GPU memory allows, or lower the model's latency so more "
                        "throughput fits its SLO.")


@pytest.mark.triton_check("OPS-3")
def test_disaster_recovery_plan_tested(triton_settings, check):
    """A disaster-recovery test is attested: a record (link), its owner and its date, within the
    age limit."""
    _review(check, triton_settings, "disaster_recovery")


@pytest.mark.triton_check("OPS-4")
def test_team_trained(triton_settings, check):
    """The team's training on this deployment is attested: a record (link), its owner and its date,
    within the age limit."""
    _review(check, triton_settings, "team_training")
