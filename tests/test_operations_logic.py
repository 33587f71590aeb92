"""OPS-1..OPS-4's decisions without a server: the capacity plan's declaration, its facts and its
numbers (operations/capacity_record.py), and one attestation onto a check."""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from pytest_triton_ready.facts import Capacity, Facts, StreamingCapacity
from pytest_triton_ready.operations.attestations import record_attestation
from pytest_triton_ready.operations.capacity_record import plan_from_facts, record_declaration, record_plan
from pytest_triton_ready.operations.schema import DeclaredCapacity
from pytest_triton_ready.record.model import Result, Verdict
from pytest_triton_ready.record.recorder import CheckRecorder
from pytest_triton_ready.settings import build_settings


def recorder(check_id: str = "OPS-2", **thresholds: float) -> CheckRecorder:
    return CheckRecorder(Result(check_id, "operations", "test", "t"), build_settings({}, {}, environ={}), thresholds)


def declared(**peaks: float) -> DeclaredCapacity:
    return DeclaredCapacity.model_validate({"peak_rate": peaks, "fleet": {"gpus": 2, "instances_per_gpu": {"a": 1}}})


def capacity(model: str, infer_s: float, instances: int = 1, **more) -> Capacity:
    return Capacity(model, max_throughput_within_slo_infer_s=infer_s, p99_ms=10.0, concurrency=4, instances=instances,
                    **more)


def facts(*capacities: Capacity) -> Facts:
    found = Facts()
    for fact in capacities:
        found.publish(fact)
    return found


def messages(check: CheckRecorder, severity: str = "error") -> list[str]:
    return [f.message for f in check.result.findings if f.severity == severity]


def test_a_declaration_without_peak_or_gpus_fails_naming_the_keys():
    check = recorder()
    assert not record_declaration(check, DeclaredCapacity(), ["a"])
    assert messages(check) == [
        "no capacity plan: declare each model's expected peak rate under operations.capacity.peak_rate (infer/s)",
        "a: in scope but has no expected peak rate in operations.capacity.peak_rate",
        "no fleet declared: set operations.capacity.fleet.gpus (and instances_per_gpu per model)"]
    assert check.result.recommendations


def test_a_peak_that_is_not_positive_fails_and_a_full_declaration_passes_on():
    check = recorder()
    assert not record_declaration(check, declared(a=0), [])
    assert messages(check) == ["a: peak rate 0 infer/s must be positive"]
    assert record_declaration(recorder(), declared(a=10), ["a"])


def test_no_capacity_fact_is_incomplete_naming_perf2():
    check = recorder()
    with pytest.raises(pytest.skip.Exception):
        plan_from_facts(check, declared(a=10), Facts(), 0.2)
    assert check.result.verdict == Verdict.INCOMPLETE
    assert "PERF-2 was not part of this run" in check.result.reason


def test_a_declared_model_perf2_did_not_measure_is_incomplete_and_a_measured_one_without_peak_fails():
    check = recorder()
    with pytest.raises(pytest.skip.Exception):
        plan_from_facts(check, declared(a=10, b=5), facts(capacity("a", 100.0)), 0.2)
    assert check.result.reason == "PERF-2 measured no throughput within SLO for b"
    check = recorder()
    assert plan_from_facts(check, declared(a=10), facts(capacity("a", 100.0), capacity("c", 5.0)), 0.2) is None
    assert messages(check) == ["c: PERF-2 measured it, but it has no expected peak rate in "
                               "operations.capacity.peak_rate"]


def test_the_plan_notes_a_lower_bound_and_instances_taken_as_measured():
    check = recorder()
    declaration = DeclaredCapacity.model_validate({"peak_rate": {"a": 10, "b": 10}, "fleet": {"gpus": 1}})
    plan = plan_from_facts(check, declaration, facts(capacity("a", 100.0, lower_bound=True), capacity("b", 50.0)), 0.2)
    assert [p.model for p in plan.models] == ["a", "b"]
    assert "a: 1 instance(s) per GPU, as measured (fleet.instances_per_gpu not declared)" in plan.assumptions
    assert any(a.startswith("a: PERF-2's capacity is a lower bound") for a in plan.assumptions)
    assert messages(check, "info") == ["a: planned with a lower bound of the capacity (>= 100 infer/s): the plan "
                                       "may ask for more GPUs than needed"]


def test_a_decoupled_model_is_planned_from_its_streaming_capacity_and_says_so():
    check = recorder()
    streaming = StreamingCapacity("generate", max_output_tokens_per_s_within_slo=1148.6,
                                  max_requests_per_s_within_slo=36.0, instances=1, output_tokens_per_request=32.0,
                                  concurrency=4, ttft_p99_ms=80.0)
    declaration = DeclaredCapacity.model_validate({"peak_rate": {"generate": 30}, "fleet": {"gpus": 1}})
    plan = plan_from_facts(check, declaration, facts(streaming), 0.0)
    [model] = plan.models
    assert (model.measured_infer_s, model.latency_label, model.measured_p99_ms) == (36.0, "TTFT p99", 80.0)
    assert any(a.startswith("generate: decoupled; its capacity is the streaming curve's requests/s within the TTFT "
                            "SLO (PERF-2, test_streaming_tokens_and_ttft_curve), each request 32.0 output tokens")
               for a in plan.assumptions)


def test_a_shared_fleet_too_small_for_the_peak_fails_with_the_numbers():
    check = recorder()
    plan = plan_from_facts(check, declared(a=300), facts(capacity("a", 100.0)), 0.0)  # 3 GPUs needed, 2 declared
    record_plan(check, plan)
    assert check.failed
    assert "a: 2 GPU(s) carry 200.0 infer/s within SLO, below the required 300.0 infer/s" in check.failure_text()
    assert "the plan needs 3 GPU(s) and the fleet declares 2" in check.failure_text()
    assert "Grow operations.capacity.fleet.gpus to at least 3" in check.result.recommendations[0]


def test_a_shared_fleet_that_carries_the_peak_passes_and_an_infeasible_model_fails():
    check = recorder()
    record_plan(check, plan_from_facts(check, declared(a=150), facts(capacity("a", 100.0)), 0.0))
    assert not check.failed and check.judged
    check = recorder()
    record_plan(check, plan_from_facts(check, declared(a=150), facts(capacity("a", 0.0)), 0.0))
    assert messages(check) == ["a: PERF-2 found no load within its SLO, so no fleet carries its peak"]


def yaml_settings(tmp_path, text: str):
    path = tmp_path / "triton-ready.yaml"
    path.write_text(textwrap.dedent(text))
    return build_settings({}, {}, environ={}, config_file=str(path))


def test_an_attestation_is_accepted_when_complete_and_recent_and_stale_fails_on_its_age(tmp_path):
    today = dt.date(2026, 6, 1)
    settings = yaml_settings(tmp_path, """
        operations:
          attestations:
            disaster_recovery: {link: "https://wiki/dr", owner: sre, date: 2026-05-01}
            team_training: {link: "https://wiki/training", owner: sre, date: 2024-01-01}
    """)
    check = recorder("OPS-3", attestation_max_age_days=180)
    assert record_attestation(check, settings, "disaster_recovery", today).accepted
    assert not check.failed and check.result.evidence
    check = recorder("OPS-4", attestation_max_age_days=180)
    assert not record_attestation(check, settings, "team_training", today).accepted
    assert check.failed and "renew it at least every 180 days" in check.result.recommendations[0]


def test_a_missing_attestation_fails_with_the_yaml_key(tmp_path):
    check = recorder("OPS-1", attestation_max_age_days=180)
    review = record_attestation(check, yaml_settings(tmp_path, "operations: {}\n"), "hot_update_runbook")
    assert not review.accepted and not review.present
    assert check.failed and "operations.attestations.hot_update_runbook" in check.result.recommendations[0]
