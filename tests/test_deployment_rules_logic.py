"""The deployment's rules on Triton's k8s-onprem chart (rendered with its defaults) and on its broken
twins (tests/data/deployments/broken, one per rule), held against measurements given here as a run
would gather them: each twin FAILs its rule naming file and field; the chart is judged on every rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from default_settings import default_settings

from pytest_triton_ready.deployment.arguments import model_control_mode, restricted_apis
from pytest_triton_ready.deployment.judgement import FAIL, INCOMPLETE, NOT_APPLICABLE, PASS, Measured, quantity
from pytest_triton_ready.deployment.manifest import read_manifest
from pytest_triton_ready.deployment.measured import gpus_needed, measured_from
from pytest_triton_ready.deployment.posture import (
    hpa_metrics,
    judge_posture,
    replicas_and_disruption_budget,
    rollout_capacity,
)
from pytest_triton_ready.deployment.probes import judge_probes
from pytest_triton_ready.deployment.recording import HOW_TO_GIVE_ONE, deployment_or_not_applicable, record
from pytest_triton_ready.deployment.resources import judge_resources
from pytest_triton_ready.deployment.termination import judge_termination
from pytest_triton_ready.facts import Capacity, CapacityPlan, Drain, Facts, ServerStart, SoakMemory
from pytest_triton_ready.record.model import Result
from pytest_triton_ready.record.recorder import CheckRecorder
from pytest_triton_ready.server.api_categories import REQUIRED_BY_DEFAULT
from pytest_triton_ready.thresholds import THRESHOLDS, ThresholdValue

DATA = Path(__file__).parent / "data" / "deployments"
ONPREM = DATA / "k8s-onprem.yaml"
VERSION = "1.25.0"  # the chart's autoscaling/v2beta2 HPA is served up to 1.25
LIMITS = {name: ThresholdValue(name, spec.default, spec.unit, "default") for name, spec in THRESHOLDS.items()}
MIB = 2**20
TRITON_METRICS = frozenset({"nv_inference_request_success", "nv_inference_queue_duration_us",
                            "nv_inference_pending_request_count", "nv_cpu_memory_used_bytes"})
MEASURED = Measured(start_to_ready_s=4.2, drain_s=1.3, refused_after_sigterm=0, peak_rss_bytes=600 * MIB,
                    memory_slope_mb_h=5.0, python_models=("scale",), gpus_needed={"scale_gpu": 1},
                    exported_metrics=TRITON_METRICS)
RULES = {"liveness-path", "readiness-path", "startup-budget", "grace-period-drain", "grace-period-exit-timeout",
         "pre-stop-delay", "memory-limit", "memory-time-to-limit", "memory-request", "cpu-limit", "dev-shm",
         "gpu-limit", "hpa-metrics", "image-pinned", "run-as-non-root", "model-repository-read-only",
         "replicas-and-disruption-budget", "model-control-mode", "restricted-apis", "rollout-capacity"}


def judge_all(path: Path, measured: Measured = MEASURED) -> dict[str, object]:
    manifest = read_manifest(path, VERSION)
    (container,) = manifest.containers
    judgements = [*judge_probes(container, measured, LIMITS), *judge_termination(container, measured, LIMITS),
                  *(j for group in judge_resources(container, measured, LIMITS).values() for j in group),
                  *hpa_metrics(manifest, container, measured), *judge_posture(container),
                  replicas_and_disruption_budget(manifest, container), rollout_capacity(manifest, container, measured),
                  model_control_mode(container),
                  restricted_apis(container, REQUIRED_BY_DEFAULT)]
    return {j.rule: j for j in judgements}


def test_the_unchanged_chart_is_judged_on_every_rule_its_own_values_included():
    judged = judge_all(ONPREM)
    assert set(judged) == RULES
    assert {rule: j.verdict for rule, j in judged.items()} == {
        "liveness-path": PASS, "readiness-path": PASS, "startup-budget": PASS, "grace-period-drain": PASS,
        "grace-period-exit-timeout": FAIL, "pre-stop-delay": PASS, "memory-limit": FAIL,
        "memory-time-to-limit": INCOMPLETE, "memory-request": PASS, "cpu-limit": PASS, "dev-shm": FAIL,
        "gpu-limit": PASS, "hpa-metrics": FAIL, "image-pinned": PASS, "run-as-non-root": PASS,
        "model-repository-read-only": FAIL, "replicas-and-disruption-budget": FAIL, "model-control-mode": PASS,
        "restricted-apis": FAIL, "rollout-capacity": INCOMPLETE}
    budget = judged["startup-budget"]
    assert budget.manifest_value == 300 and budget.measured == 4.2  # the chart's 30 x 10 s, not assumed good
    assert budget.field == "spec.template.spec.containers[0].startupProbe"
    assert "startupProbe: 0 + 30 x 10 = 300 s; measured start-to-ready 4.2 s x (1 + 0.5) = 6.3 s" in budget.message
    grace = judged["grace-period-exit-timeout"]  # Kubernetes' 30 s default equals Triton's 30 s exit timeout
    assert grace.field == "spec.template.spec.terminationGracePeriodSeconds" and grace.manifest_value == 30
    assert "(Kubernetes' default)" in grace.message and "--exit-timeout-secs 30 s (Triton default)" in grace.message
    assert judged["hpa-metrics"].manifest_value == ["avg_time_queue_us"]


@pytest.mark.parametrize(("chart", "budget"), [("gcp", "livenessProbe: 0 + 3 x 10 = 30 s"),
                                               ("aws", "livenessProbe: 0 + 3 x 10 = 30 s")])
def test_the_cloud_charts_are_judged_on_every_rule_but_the_autoscaler_they_lack(chart, budget):
    judged = judge_all(DATA / f"{chart}.yaml")
    assert set(judged) == RULES - {"hpa-metrics"}
    start = judged["startup-budget"]  # no startupProbe: the liveness probe's Kubernetes defaults are the budget
    assert start.field == "spec.template.spec.containers[0].livenessProbe" and budget in start.message
    assert start.verdict == PASS and start.manifest_value == 30
    assert judged["model-repository-read-only"].verdict == NOT_APPLICABLE  # gs:// or s3://, not a mount
    assert judged["liveness-path"].verdict == PASS and judged["grace-period-exit-timeout"].verdict == FAIL
    slow = judge_all(DATA / f"{chart}.yaml", Measured(start_to_ready_s=25.0))["startup-budget"]
    assert slow.verdict == FAIL and "failureThreshold: 4" in slow.fix  # 25 s x 1.5 needs 4 x 10 s


@pytest.mark.parametrize(("twin", "rule", "field", "words"), [
    ("liveness-on-ready", "liveness-path", "spec.template.spec.containers[0].livenessProbe.httpGet.path",
     "livenessProbe asks /v2/health/ready"),
    ("short-startup-budget", "startup-budget", "spec.template.spec.containers[0].startupProbe",
     "startupProbe: 0 + 1 x 1 = 1 s; measured start-to-ready 4.2 s"),
    ("short-grace-period", "grace-period-drain", "spec.template.spec.terminationGracePeriodSeconds",
     "terminationGracePeriodSeconds 1 s; preStop 0 s + measured drain 1.3 s + margin 5 s = 6.3 s needed"),
    ("memory-limit-below-peak", "memory-limit", "spec.template.spec.containers[0].resources.limits.memory",
     "limit 0.06 GiB; measured peak 0.59 GiB"),
    ("shm-not-memory-backed", "dev-shm", "spec.template.spec.volumes[1].emptyDir",
     "medium not Memory, sizeLimit none; python backend models: scale"),
    ("gpu-models-without-gpu-limit", "gpu-limit", "spec.template.spec.containers[0].resources.limits.nvidia.com/gpu",
     "no nvidia.com/gpu limit; KIND_GPU models and the GPUs they reference: scale_gpu (1)"),
    ("hpa-on-unexported-metric", "hpa-metrics", "spec.metrics[0]", "not exported by this server: gpu_used_memory"),
])
def test_each_broken_twin_fails_its_rule_naming_file_and_field(twin, rule, field, words):
    path = DATA / "broken" / f"{twin}.yaml"
    judged = judge_all(path)[rule]
    assert judged.verdict == FAIL, judged
    assert judged.file.startswith(str(path)) and judged.field == field
    assert words in judged.message and judged.fix
    chart = judge_all(ONPREM)[rule]  # the chart passes, or fails the rule for its own reason (no limit, no mount)
    assert chart.verdict == PASS or chart.message != judged.message


def test_a_missing_measurement_is_incomplete_naming_it_never_a_pass():
    judged = judge_all(ONPREM, measured_from(Facts(), None, None, "connection refused", 600.0))
    for rule in ("startup-budget", "grace-period-drain", "pre-stop-delay", "dev-shm", "gpu-limit", "hpa-metrics"):
        assert judged[rule].verdict == INCOMPLETE, rule
    assert "test_server_crash_restart_answers_correctly (PERF-4)" in judged["startup-budget"].message
    assert "test_sigterm_under_traffic_is_graceful (PERF-4)" in judged["grace-period-drain"].message
    assert "connection refused" in judged["hpa-metrics"].message


def test_the_measurements_come_from_the_facts_and_a_short_soak_gives_no_slope():
    facts = Facts()
    facts.publish(ServerStart(3.5))
    facts.publish(Drain(2.0, 4, 30.0))
    facts.publish(SoakMemory(peak_rss_bytes=500 * MIB, slope_mb_h=900.0, slope_high_mb_h=1200.0, span_s=50.0,
                             leak_judged=False))
    configs = {"scale": {"backend": "python", "instance_group": [{"kind": "KIND_CPU"}]},
               "vision": {"backend": "onnxruntime", "instance_group": [{"kind": "KIND_GPU", "gpus": [0, 1]}]}}
    measured = measured_from(facts, configs, TRITON_METRICS, None, 600.0)
    assert (measured.start_to_ready_s, measured.drain_s, measured.refused_after_sigterm) == (3.5, 2.0, 4)
    assert measured.python_models == ("scale",) and measured.gpus_needed == {"vision": 2}
    assert measured.memory_slope_mb_h is None and "shorter than soak_leak_min_duration_s" in \
        measured.why_missing("memory_slope_mb_h")
    judged = judge_all(DATA / "broken" / "gpu-models-without-gpu-limit.yaml", measured)
    assert judged["memory-time-to-limit"].verdict == INCOMPLETE
    assert judged["pre-stop-delay"].verdict == FAIL and "4 requests were refused after SIGTERM" in \
        judged["pre-stop-delay"].message
    assert gpus_needed({"m": {"instance_group": [{"kind": "KIND_GPU"}]}}) == {"m": 1}


def test_time_to_limit_at_the_soak_slope_against_the_horizon():
    path = DATA / "broken" / "gpu-models-without-gpu-limit.yaml"  # an 8 GiB limit
    leaking = judge_all(path, Measured(peak_rss_bytes=4 * 2**30, memory_slope_mb_h=1843.2,
                                       memory_slope_high_mb_h=2000.0))["memory-time-to-limit"]
    assert leaking.verdict == FAIL and "at 1843.2 MB/h" in leaking.message and "limit in 2.2 h" in leaking.message
    flat = judge_all(path, Measured(peak_rss_bytes=4 * 2**30, memory_slope_mb_h=-1.0))["memory-time-to-limit"]
    assert flat.verdict == PASS and "never" in flat.message


def test_an_adapter_rule_in_the_manifests_makes_the_charts_hpa_metric_known(tmp_path):
    rules = {"rules": {"custom": [{"seriesQuery": 'nv_inference_queue_duration_us{namespace="default"}',
                                   "name": {"matches": "nv_inference_queue_duration_us", "as": "avg_time_queue_us"}}]}}
    adapter = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "adapter"},
               "data": {"config.yaml": yaml.safe_dump(rules)}}
    path = tmp_path / "rendered.yaml"
    path.write_text(ONPREM.read_text() + "\n---\n" + yaml.safe_dump(adapter))
    judged = judge_all(path)["hpa-metrics"]
    assert judged.verdict == PASS and "avg_time_queue_us (from nv_inference_queue_duration_us)" in judged.message


def test_quantities_and_a_repository_that_is_no_mount(tmp_path):
    assert (quantity("4Gi"), quantity("512M"), quantity("500m"), quantity(2)) == (4 * 2**30, 512e6, 0.5, 2.0)
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity("lots")
    deployment, hpa = yaml.safe_load_all(ONPREM.read_text())
    deployment["spec"]["template"]["spec"]["containers"][0]["args"][1] = "--model-repository=s3://bucket/models"
    path = tmp_path / "cloud.yaml"
    path.write_text(yaml.safe_dump_all([deployment, hpa]))
    judged = judge_all(path)["model-repository-read-only"]
    assert judged.verdict == NOT_APPLICABLE and "s3://bucket/models: not a mounted volume" in judged.message


def test_the_cpu_limit_against_the_servers_cpu_at_capacity(tmp_path):
    deployment, hpa = yaml.safe_load_all(ONPREM.read_text())
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1500m"
    path = tmp_path / "cpu.yaml"
    path.write_text(yaml.safe_dump_all([deployment, hpa]))
    facts = Facts()
    unknown = judge_all(path, measured_from(facts, {}, TRITON_METRICS, None, 600.0))["cpu-limit"]
    assert unknown.verdict == INCOMPLETE and "test_throughput_latency_curve (PERF-2)" in unknown.message
    facts.publish(Capacity("scale", 400.0, 41.5, 8, 2, server_cpu_cores=None))
    attached = judge_all(path, measured_from(facts, {}, TRITON_METRICS, None, 600.0))["cpu-limit"]
    assert attached.verdict == INCOMPLETE and "not visible from this runner" in attached.message
    facts.publish(Capacity("scale", 400.0, 41.5, 8, 2, server_cpu_cores=1.4))
    throttled = judge_all(path, measured_from(facts, {}, TRITON_METRICS, None, 600.0))["cpu-limit"]
    assert throttled.verdict == FAIL and throttled.manifest_value == 1.5 and throttled.measured == 1.4
    assert "1.40 cores used by the server at PERF-2's capacity x (1 + 0.2) = 1.68 needed" in throttled.message
    facts.publish(Capacity("scale", 400.0, 41.5, 8, 2, server_cpu_cores=1.0))
    assert judge_all(path, measured_from(facts, {}, TRITON_METRICS, None, 600.0))["cpu-limit"].verdict == PASS


def test_two_replicas_need_a_disruption_budget_that_selects_their_pods(tmp_path):
    deployment, hpa = yaml.safe_load_all(ONPREM.read_text())
    chart = judge_all(ONPREM)["replicas-and-disruption-budget"]
    assert chart.manifest_value == 1 and "(the autoscaler's minReplicas); no PodDisruptionBudget" in chart.message
    hpa["spec"]["minReplicas"] = 2
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "triton"},
              "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "other"}}}}
    path = tmp_path / "rendered.yaml"
    path.write_text(yaml.safe_dump_all([deployment, hpa, budget]))
    elsewhere = judge_all(path)["replicas-and-disruption-budget"]
    assert elsewhere.verdict == FAIL and "no PodDisruptionBudget selects the pods" in elsewhere.message
    budget["spec"]["selector"]["matchLabels"] = {"app": "triton-inference-server", "release": "example"}
    path.write_text(yaml.safe_dump_all([deployment, hpa, budget]))
    judged = judge_all(path)["replicas-and-disruption-budget"]
    assert judged.verdict == PASS and judged.field == "spec.replicas" and judged.manifest_value == 2


def _recorder() -> CheckRecorder:
    return CheckRecorder(Result("PERF-4", "operations", "t", "checks/test_deployment.py::t"), default_settings())


def test_a_check_records_each_judgement_and_is_incomplete_only_where_nothing_failed():
    unmeasured = judge_all(ONPREM, measured_from(Facts(), {}, TRITON_METRICS, None, 600.0))
    check = _recorder()
    with pytest.raises(pytest.skip.Exception, match="incomplete: startup-budget: startupProbe: 0 \\+ 30 x 10"):
        record(check, [unmeasured["liveness-path"], unmeasured["startup-budget"]])
    assert check.result.verdict.value == "incomplete"
    assert [j.rule for j in check.result.judgements] == ["liveness-path"]
    assert any(s.name == "startup-budget: spec.template.spec.containers[0].startupProbe" and s.value == 300
               for s in check.result.settings)
    failing = _recorder()
    record(failing, [unmeasured["grace-period-exit-timeout"], unmeasured["grace-period-drain"]])
    assert failing.failed and failing.result.verdict.value != "incomplete"
    assert failing.errors[0].message.startswith(f"grace-period-exit-timeout: {ONPREM} document 0: "
                                                "spec.template.spec.terminationGracePeriodSeconds: ")
    assert failing.result.recommendations[0].startswith(f"{ONPREM} document 0: spec.template.spec."
                                                        "terminationGracePeriodSeconds: terminationGracePeriodSeconds: 35")
    absent = _recorder()
    with pytest.raises(pytest.skip.Exception, match="--triton-deployment=rendered.yaml"):
        deployment_or_not_applicable(absent, type("Run", (), {"deployment": None})())
    assert absent.result.reason == HOW_TO_GIVE_ONE


def test_the_readiness_probe_states_its_detection_time_and_a_release_blind_to_dead_stubs():
    old = judge_all(ONPREM, Measured(python_models=("scale",), server_version="2.51.0"))["readiness-path"]
    assert old.verdict == PASS  # the path is right; what Triton 2.51 answers is said beside it
    assert "takes the pod out of the endpoints 15 s after it stops being ready" in old.message
    assert "on Triton 2.51.0 a dead python backend stub leaves /v2/health/ready at 200" in old.message
    new = judge_all(ONPREM, Measured(python_models=("scale",), server_version="2.68.0"))["readiness-path"]
    assert "dead python backend stub" not in new.message
    no_python = judge_all(ONPREM, Measured(python_models=(), server_version="2.51.0"))["readiness-path"]
    assert "dead python backend stub" not in no_python.message


def test_the_server_arguments_poll_mode_and_restricted_apis_per_protocol(tmp_path):
    aws = judge_all(DATA / "aws.yaml")["model-control-mode"]
    assert aws.verdict == FAIL and aws.field == "spec.template.spec.containers[0].args[2]"
    assert aws.message == "--model-control-mode=poll" and "explicit" in aws.fix
    assert judge_all(ONPREM)["model-control-mode"].message == "--model-control-mode=none (Triton's default)"
    open_apis = judge_all(ONPREM)["restricted-apis"]
    assert ("HTTP (--http-restricted-api) leaves model-repository, shared-memory, logging, trace open; gRPC "
            "(--grpc-restricted-protocol) leaves model-repository, shared-memory, logging, trace open") in \
        open_apis.message
    deployment, hpa = yaml.safe_load_all(ONPREM.read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["args"] += ["--http-restricted-api=model-repository,shared-memory:admin-key=${KEY}",
                          "--http-restricted-api=logging,trace:admin-key=${KEY}", "--allow-grpc=false"]
    path = tmp_path / "restricted.yaml"
    path.write_text(yaml.safe_dump_all([deployment, hpa]))
    judged = judge_all(path)["restricted-apis"]
    assert judged.verdict == PASS and judged.message.endswith("restricted on HTTP")  # gRPC is not served


def test_the_replicas_left_serving_during_a_rollout_carry_the_declared_peak(tmp_path):
    facts = Facts()
    facts.publish(Capacity("scale", 400.0, 41.5, 8, 2))

    def judged(deployment, hpa, required):
        plan = CapacityPlan("shared", 1, 1, True, {"scale": {"required_infer_s": required, "per_instance_infer_s": 200}})
        facts.publish(plan)
        path = tmp_path / "rendered.yaml"
        path.write_text(yaml.safe_dump_all([deployment, hpa]))
        return judge_all(path, measured_from(facts, {}, TRITON_METRICS, None, 600.0))["rollout-capacity"]

    deployment, hpa = yaml.safe_load_all(ONPREM.read_text())
    one = judged(deployment, hpa, 260.0)  # 25% of one replica rounds down to 0 unavailable
    assert one.verdict == PASS and "1 replica(s), maxUnavailable 0: 1 serving during a rollout" in one.message
    assert "scale 1 x 400 infer/s against 260 needed" in one.message and one.field == "spec.strategy"
    assert judged(deployment, hpa, 500.0).verdict == FAIL
    hpa["spec"]["minReplicas"] = 4
    deployment["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}}
    half = judged(deployment, hpa, 700.0)
    assert half.verdict == PASS and "4 replica(s), maxUnavailable 2: 2 serving" in half.message
    deployment["spec"]["strategy"] = {"type": "Recreate"}
    recreate = judged(deployment, hpa, 1.0)
    assert recreate.verdict == FAIL and "Recreate: none serving during a rollout" in recreate.message
    no_plan = judge_all(ONPREM, measured_from(Facts(), {}, TRITON_METRICS, None, 600.0))["rollout-capacity"]
    assert no_plan.verdict == INCOMPLETE and "test_throughput_latency_curve (PERF-2)" in no_plan.message
