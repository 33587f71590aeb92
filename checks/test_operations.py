"""Phase "operations": what keeps a deployment running after go-live.

A runbook, a disaster-recovery drill and a team's training cannot be proven by a machine: they are
attestations in the YAML (`operations.attestations`), accepted when complete and recent. The
hot-update procedure is, in addition, exercised for real by the hot-reload experiment of this run.
The capacity plan is computed from PERF-2's measurements, never attested.
"""

import pytest

from pytest_triton_ready.facts import HotReload
from pytest_triton_ready.operations.attestations import record_attestation
from pytest_triton_ready.operations.capacity_record import plan_from_facts, record_declaration, record_plan
from pytest_triton_ready.operations.schema import DeclaredCapacity


@pytest.mark.triton_check("OPS-1")
def test_hot_update_procedure_documented_and_exercised(triton_settings, triton_facts, check):
    """The hot-update runbook is attested (link, owner, date within the age limit) AND the
    hot-reload experiment of this run passed: a model reloaded under load without failed requests."""
    review = record_attestation(check, triton_settings, "hot_update_runbook")
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
    if not record_declaration(check, capacity, triton_settings.triton_models or []):
        return
    plan = plan_from_facts(check, capacity, triton_facts, check.threshold("capacity_headroom").value)
    if plan is None:
        return
    triton_facts.publish(plan.to_fact())
    record_plan(check, plan)


@pytest.mark.triton_check("OPS-3")
def test_disaster_recovery_plan_tested(triton_settings, check):
    """A disaster-recovery test is attested: a record (link), its owner and its date, within the
    age limit."""
    record_attestation(check, triton_settings, "disaster_recovery")


@pytest.mark.triton_check("OPS-4")
def test_team_trained(triton_settings, check):
    """The team's training on this deployment is attested: a record (link), its owner and its date,
    within the age limit."""
    record_attestation(check, triton_settings, "team_training")
