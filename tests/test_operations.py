"""OPS-1..OPS-4 through pytester: attestations accepted, missing and stale; the hot-reload
experiment's fact present, failed and absent; the capacity arithmetic passing and failing.

The facts other phases publish (PERF-2's `Capacity`, the hot-reload experiment's `HotReload`)
are set by a plain test file that runs before the checks (checks run in phase order, plain tests
first), through the public `triton_facts` fixture, in the report's form (`Facts.publish_json`).
"""

from __future__ import annotations

import datetime as dt
import json
import textwrap

import pytest

from pytest_triton_ready.operations.capacity import FleetPlan, model_plan

TODAY = dt.datetime.now(dt.timezone.utc).date()


def days_ago(n: int) -> str:
    return (TODAY - dt.timedelta(days=n)).isoformat()


def facts_file(pytester, **facts) -> str:
    """A plain test file that publishes `facts` before any check runs; returns its path."""
    path = pytester.makepyfile(publish_facts=f"""
        import json

        def test_publish_facts(triton_facts):
            triton_facts.publish_json(json.loads({json.dumps(json.dumps(facts))}))
    """)
    return str(path)


def settings_file(pytester, text: str) -> str:
    path = pytester.path / "triton-ready.yaml"
    path.write_text(textwrap.dedent(text))
    return f"--triton-config={path}"


def findings(result: dict, severity: str = "error") -> list[str]:
    return [f["message"] for f in result["findings"] if f["severity"] == severity]


def measured(result: dict, name: str, model: str | None = None) -> dict:
    matches = [m for m in result["measurements"] if m["name"] == name and (model is None or m["model"] == model)]
    assert matches, f"no measurement {name!r} for {model} in {result['check_id']}"
    return matches[0]


CAPACITY_FACT = {
    "scale": {"max_throughput_within_slo_infer_s": 400.0, "p99_ms": 41.5, "concurrency": 8, "instances": 2,
              "slo_p99_ms": 50.0},
    "cached_sum": {"max_throughput_within_slo_infer_s": 300.0, "p99_ms": 12.0, "concurrency": 4, "instances": 1,
                   "slo_p99_ms": 20.0},
}


def good_yaml(pytester, gpus: int = 4) -> str:
    runbook = pytester.path / "runbooks" / "hot-update.md"
    runbook.parent.mkdir(exist_ok=True)
    runbook.write_text("# Hot update\n")
    return settings_file(pytester, f"""
        operations:
          attestations:
            hot_update_runbook: {{link: runbooks/hot-update.md, owner: ml-platform, date: {days_ago(10)}}}
            disaster_recovery: {{link: "https://wiki.example.com/dr-drill-2026", owner: sre, date: {days_ago(45)}}}
            team_training: {{link: "https://wiki.example.com/triton-training", owner: ml-platform, date: "{days_ago(89)}"}}
          capacity:
            peak_rate: {{scale: 1000, cached_sum: 500}}
            fleet: {{gpus: {gpus}, instances_per_gpu: {{scale: 2, cached_sum: 1}}}}
    """)


def test_every_operations_check_passes_with_fresh_attestations_and_enough_capacity(run_checklist, pytester):
    facts = facts_file(pytester, **{"perf.capacity": CAPACITY_FACT,
                                    "faults.hot_reload": {"passed": True, "failed_requests": 0, "recovery_s": 1.8}})
    run = run_checklist(facts, "test_operations.py", args=(good_yaml(pytester, gpus=4),))
    run.outcome.assert_outcomes(passed=5)
    verdicts = {r["check_id"]: r["verdict"] for r in run.report["results"]}
    assert verdicts == {"OPS-1": "pass", "OPS-2": "pass", "OPS-3": "pass", "OPS-4": "pass"}

    ops1 = run.result("test_hot_update_procedure_documented_and_exercised")
    assert measured(ops1, "hot-update runbook age")["value"] == 10
    assert measured(ops1, "hot-update runbook age")["threshold"] == 90
    assert measured(ops1, "failed requests during the hot reload")["value"] == 0
    assert measured(ops1, "time until the reloaded model served")["value"] == 1.8
    assert measured(run.result("test_team_trained"), "team training record age")["value"] == 89

    # scale: 400 / 2 = 200 per instance; 1000 x 1.3 = 1300 required; ceil(6.5) = 7 instances; ceil(7 / 2) = 4 GPUs
    # cached_sum: 300 per instance; 650 required; 3 instances; 3 GPUs. Shared placement: the fleet needs 4.
    ops2 = run.result("test_capacity_plan_carries_declared_peak")
    assert measured(ops2, "throughput per instance", "scale")["value"] == 200.0
    assert measured(ops2, "required (peak x (1 + headroom))", "scale")["value"] == 1300.0
    assert measured(ops2, "instances needed", "scale")["value"] == 7
    assert measured(ops2, "GPUs needed", "scale")["value"] == 4
    assert measured(ops2, "GPUs needed", "cached_sum")["value"] == 3
    assert measured(ops2, "fleet capacity", "scale")["value"] == 1600.0
    fleet = measured(ops2, "fleet GPUs needed")
    assert (fleet["value"], fleet["threshold"], fleet["passed"]) == (4, 4, True)
    arithmetic = next(e["text"] for e in ops2["evidence"] if e["label"] == "capacity arithmetic")
    assert "per instance     = 400.0 / 2 = 200.0 infer/s" in arithmetic
    assert "required         = peak 1000 infer/s x (1 + headroom 0.3) = 1300.0 infer/s" in arithmetic
    assert "instances needed = ceil(1300.0 / 200.0) = 7" in arithmetic
    assert "GPUs needed      = ceil(7 / 2 instance(s) per GPU) = 4" in arithmetic
    assert "fleet declared: 4 GPU(s) -> carries the peak" in arithmetic
    assert ops2["charts"] and ops2["charts"][0]["kind"] == "bar"


def test_operations_checks_fail_and_say_why(run_checklist, pytester):
    facts = facts_file(pytester, **{"perf.capacity": CAPACITY_FACT,
                                    "faults.hot_reload": {"passed": False, "failed_requests": 37, "recovery_s": 4.2}})
    config = settings_file(pytester, f"""
        operations:
          attestations:
            hot_update_runbook: {{link: "https://wiki.example.com/hot-update", owner: ml-platform, date: {days_ago(5)}}}
            team_training: {{link: records/missing.pdf, date: {days_ago(200)}}}
          capacity:
            peak_rate: {{scale: 1000, cached_sum: 500}}
            fleet: {{gpus: 3, instances_per_gpu: {{scale: 2, cached_sum: 1}}}}
    """)
    run = run_checklist(facts, "test_operations.py", args=(config,))
    run.outcome.assert_outcomes(passed=1, failed=4)
    ops1 = run.result("test_hot_update_procedure_documented_and_exercised")
    assert ops1["verdict"] == "fail"
    assert findings(ops1) == ["the hot-reload experiment of this run failed: a model reload under load was not clean"]
    assert measured(ops1, "failed requests during the hot reload")["value"] == 37

    ops3 = run.result("test_disaster_recovery_plan_tested")
    assert ops3["verdict"] == "fail"
    assert findings(ops3) == ["no disaster-recovery test record is declared "
                              "(operations.attestations.disaster_recovery with link, owner and date)"]

    ops4 = run.result("test_team_trained")
    problems = findings(ops4)
    assert "operations.attestations.team_training.owner is missing" in problems
    assert any("the file records/missing.pdf does not exist" in p for p in problems)
    assert any(p.startswith(f"the team training record is stale: dated {days_ago(200)}, 200 days ago") for p in problems)
    assert ops4["recommendations"]

    ops2 = run.result("test_capacity_plan_carries_declared_peak")
    assert ops2["verdict"] == "fail"
    assert "the plan needs 4 GPU(s) and the fleet declares 3" in findings(ops2)
    assert "scale: 3 GPU(s) carry 1200.0 infer/s within SLO, below the required 1300.0 infer/s" in findings(ops2)
    assert measured(ops2, "fleet capacity", "cached_sum")["passed"] is True  # 3 x 1 x 300 = 900 >= 650
    arithmetic = next(e["text"] for e in ops2["evidence"] if e["label"] == "capacity arithmetic")
    assert "fleet declared: 3 GPU(s) -> does NOT carry the peak" in arithmetic
    assert "Grow operations.capacity.fleet.gpus to at least 4" in " ".join(ops2["recommendations"])
    assert run.report["verdict"] == "NOT READY"


def test_missing_experiment_and_measurements_make_ops1_and_ops2_incomplete(run_checklist, pytester):
    run = run_checklist("test_operations.py", args=(good_yaml(pytester),))
    run.outcome.assert_outcomes(passed=2, skipped=2)
    ops1 = run.result("test_hot_update_procedure_documented_and_exercised")
    assert ops1["verdict"] == "incomplete"
    assert ("hot-reload experiment is missing (faults.hot_reload): test_forced_reload_under_traffic_loses_no_request "
            "(PERF-4) was not part of this run") in ops1["reason"]
    ops2 = run.result("test_capacity_plan_carries_declared_peak")
    assert ops2["verdict"] == "incomplete"
    assert "PERF-2 was not part of this run" in ops2["reason"]
    assert "test_throughput_latency_curve (PERF-2)" in ops2["reason"]
    assert run.report["verdict"] == "INCOMPLETE"


def test_capacity_fact_for_one_model_only_is_incomplete_not_pass(run_checklist, pytester):
    facts = facts_file(pytester, **{"perf.capacity": {"scale": CAPACITY_FACT["scale"]}})
    run = run_checklist(facts, "test_operations.py", args=(good_yaml(pytester), "-k", "capacity or publish"))
    ops2 = run.result("test_capacity_plan_carries_declared_peak")
    assert ops2["verdict"] == "incomplete"
    assert ops2["reason"] == "PERF-2 measured no throughput within SLO for cached_sum"


def test_no_plan_declared_fails_and_threshold_overrides_apply(run_checklist, pytester):
    facts = facts_file(pytester, **{"perf.capacity": CAPACITY_FACT})
    config = settings_file(pytester, f"""
        operations:
          attestations:
            disaster_recovery: {{link: "https://wiki.example.com/dr", owner: sre, date: {days_ago(120)}}}
        thresholds:
          attestation_max_age_days: 180
    """)
    run = run_checklist(facts, "test_operations.py", args=(config, "-k", "capacity or disaster or publish",
                                                            "--triton-models=scale"))
    ops2 = run.result("test_capacity_plan_carries_declared_peak")
    assert ops2["verdict"] == "fail"
    assert any(f.startswith("no capacity plan") for f in findings(ops2))
    assert "scale: in scope but has no expected peak rate in operations.capacity.peak_rate" in findings(ops2)
    assert any(f.startswith("no fleet declared") for f in findings(ops2))
    ops3 = run.result("test_disaster_recovery_plan_tested")
    age = measured(ops3, "disaster-recovery test record age")
    assert ops3["verdict"] == "pass" and age["value"] == 120 and age["threshold"] == 180
    assert age["threshold_source"].startswith("yaml:")


def test_a_date_that_is_not_a_date_is_a_usage_error_naming_file_and_line(run_checklist, pytester):
    config = settings_file(pytester, """
        operations:
          attestations:
            team_training: {link: x, owner: y, date: last spring}
    """)
    run = run_checklist("test_operations.py", args=(config,))
    assert run.outcome.ret == pytest.ExitCode.USAGE_ERROR
    run.outcome.stderr.fnmatch_lines(["*triton-ready.yaml:4: key 'operations.attestations.team_training.date': "
                                      "expected a date (YYYY-MM-DD), got 'last spring'*"])


def test_dedicated_placement_sums_the_models_gpus():
    plans = [model_plan("scale", CAPACITY_FACT["scale"], 1000, 0.3, 2),
             model_plan("cached_sum", CAPACITY_FACT["cached_sum"], 500, 0.3, 1)]
    assert FleetPlan(plans, "shared", 6).gpus_needed == 4
    dedicated = FleetPlan(plans, "dedicated", 6)
    assert dedicated.gpus_needed == 7 and not dedicated.carries_peak
    assert "sum over the models" in dedicated.arithmetic()
    # instances per GPU defaults to the instances the measurement used
    assert model_plan("scale", CAPACITY_FACT["scale"], 1000, 0.3, None).instances_per_gpu == 2
    with pytest.raises(ValueError, match="lacks instances"):
        model_plan("scale", {"max_throughput_within_slo_infer_s": 1.0}, 10, 0.3, None)


def test_a_measured_model_without_a_peak_rate_fails_ops2(run_checklist, pytester):
    facts = facts_file(pytester, **{"perf.capacity": CAPACITY_FACT})
    config = settings_file(pytester, """
        operations:
          capacity:
            peak_rate: {scale: 100}
            fleet: {gpus: 1}
    """)
    run = run_checklist(facts, "test_operations.py", args=(config, "-k", "capacity or publish"))
    ops2 = run.result("test_capacity_plan_carries_declared_peak")
    assert ops2["verdict"] == "fail"
    assert findings(ops2) == ["cached_sum: PERF-2 measured it, but it has no expected peak rate in "
                              "operations.capacity.peak_rate"]


def test_attestation_dated_in_the_future_or_with_a_bad_link_is_refused(tmp_path):
    from pytest_triton_ready.operations.attestations import review_attestation

    (tmp_path / "drill.md").write_text("done")
    section = {"attestations": {
        "disaster_recovery": {"link": "drill.md", "owner": "sre", "date": TODAY + dt.timedelta(days=3)},
        "team_training": {"link": "ftp://files/training", "owner": "ml", "date": TODAY},
    }}
    dr = review_attestation(section, "disaster_recovery", 90, TODAY, tmp_path)
    assert dr.link_kind == "file" and dr.problems == [
        f"operations.attestations.disaster_recovery.date {(TODAY + dt.timedelta(days=3)).isoformat()} is in the future"]
    training = review_attestation(section, "team_training", 90, TODAY, tmp_path)
    assert training.problems == ["operations.attestations.team_training.link: 'ftp://files/training' is neither "
                                 "an http(s) URL nor a file path"]
    assert review_attestation(section, "disaster_recovery", 90, TODAY + dt.timedelta(days=3), tmp_path).accepted


def test_a_streaming_models_capacity_is_planned_from_the_streaming_curve():
    from pytest_triton_ready.facts import Facts
    from pytest_triton_ready.operations.capacity import from_streaming_capacity, measured_capacities

    streaming = {"max_output_tokens_per_s_within_slo": 1148.6, "max_requests_per_s_within_slo": 36.0,
                 "output_tokens_per_request": 32.0, "concurrency": 8, "ttft_p99_ms": 31.4, "instances": 1,
                 "lower_bound": True}
    facts = Facts()
    facts.publish_json({"perf.capacity": {"scale": CAPACITY_FACT["scale"]},
                        "perf.streaming_capacity": {"generate": streaming}})
    measured, problems = measured_capacities(facts)
    assert set(measured) == {"scale", "generate"} and problems == []
    assert measured["scale"] == {**CAPACITY_FACT["scale"], "lower_bound": False, "throughput_low_infer_s": None,
                                 "level": None, "server_cpu_cores": None}
    with pytest.raises(ValueError, match="streaming capacity fact for old lacks max_requests_per_s_within_slo"):
        from_streaming_capacity("old", {"instances": 1})
    fact = from_streaming_capacity("generate", streaming)
    assert fact["max_throughput_within_slo_infer_s"] == 36.0 and fact["streaming"] and fact["lower_bound"]
    plan = model_plan("generate", fact, 50, 0.3, None)  # 50 requests/s x 1.3 = 65 -> 2 instances of 36
    assert (plan.instances_needed, plan.gpus_needed) == (2, 2)
    assert "measured TTFT p99 31.4 ms, concurrency 8" in "\n".join(plan.arithmetic())
    # a unary capacity for the same name wins (the unary sweep measured it)
    both = Facts()
    both.publish_json({"perf.capacity": {"generate": CAPACITY_FACT["scale"]},
                       "perf.streaming_capacity": {"generate": streaming}})
    assert measured_capacities(both)[0]["generate"]["max_throughput_within_slo_infer_s"] == 400.0
