"""checks/test_deployment.py through pytester against real servers: NOT APPLICABLE without a
manifest; with Triton's k8s-onprem chart, every rule judged against what this very run measured
(PERF-4's crash + restart and SIGTERM, PERF-3's soak, the demo's model configs and /metrics)."""

from __future__ import annotations

from pathlib import Path

import yaml

ONPREM = Path(__file__).parent / "data" / "deployments" / "k8s-onprem.yaml"
DEPLOYMENT = "test_deployment.py"
CHECKS = ("test_deployment_probes_cover_measured_start", "test_deployment_grace_period_covers_measured_drain",
          "test_deployment_memory_limit_covers_measured_peak", "test_deployment_cpu_limit_keeps_measured_capacity",
          "test_deployment_shm_and_gpus_fit_the_models", "test_deployment_autoscaler_scales_on_exported_metrics",
          "test_deployment_keeps_a_replica_through_drains_and_rollouts", "test_deployment_model_control_mode_is_not_poll",
          "test_deployment_rollout_keeps_the_declared_peak", "test_deployment_runs_the_flags_this_run_measured",
          "test_deployment_image_pinned_non_root_models_read_only")


def _value(result: dict, name: str) -> object:
    matches = [m["value"] for m in result["measurements"] if m["name"] == name]
    assert matches, f"{result['nodeid']}: no measurement {name!r}: {[m['name'] for m in result['measurements']]}"
    return matches[0]


def _rules(result: dict) -> dict[str, bool]:
    return {j["rule"]: j["passed"] for j in result["judgements"]}


def test_without_a_manifest_every_deployment_check_says_how_to_give_one(run_checklist):
    run = run_checklist(DEPLOYMENT)
    for name in CHECKS:
        result = run.result(name)
        assert result["verdict"] == "not_applicable", result
        assert "--triton-deployment=rendered.yaml" in result["reason"] and "helm template" in result["reason"]


def test_the_chart_is_judged_against_what_this_run_measured(run_checklist):
    run = run_checklist("test_performance_recovery.py", "test_soak.py", DEPLOYMENT, url=None,
                        args=("--triton-launch=embedded", "-k", "crash or sigterm or soak_stability or deployment",
                              "--triton-soak=8s", f"--triton-deployment={ONPREM}", "--triton-kubernetes-version=1.25.0"))
    crash = run.result("test_server_crash_restart_answers_correctly")
    sigterm = run.result("test_sigterm_under_traffic_is_graceful")
    probes = run.result("test_deployment_probes_cover_measured_start")
    assert probes["verdict"] == "pass", probes
    assert _value(probes, "startup-budget: start-to-ready time") == _value(crash, "time from SIGKILL until ready")
    assert _rules(probes) == {"liveness-path": True, "readiness-path": True, "startup-budget": True}
    assert any("startupProbe: 0 + 30 x 10 = 300 s" in j["measured"] for j in probes["judgements"])
    # the embedded server is Triton 2.51 (nvidia-pytriton 0.7.0): its ready endpoint hides a dead python stub
    assert any("a dead python backend stub leaves /v2/health/ready at 200" in j["measured"]
               for j in probes["judgements"])

    grace = run.result("test_deployment_grace_period_covers_measured_drain")
    assert grace["verdict"] == "fail"  # Kubernetes' 30 s grace period is not more than Triton's 30 s exit timeout
    assert _rules(grace)["grace-period-exit-timeout"] is False and _rules(grace)["grace-period-drain"] is True
    assert _value(grace, "grace-period-drain: drain under traffic (SIGTERM until exit)") == \
        _value(sigterm, "time from SIGTERM until the process exited")
    refused = _value(sigterm, "requests refused cleanly after SIGTERM")
    assert _rules(grace)["pre-stop-delay"] is (refused == 0)

    memory = run.result("test_deployment_memory_limit_covers_measured_peak")
    assert memory["verdict"] == "fail" and _rules(memory)["memory-limit"] is False  # the chart sets no memory limit
    assert any("resources.limits.memory" in r and "Mi or more" in r for r in memory["recommendations"])

    assert run.result("test_deployment_cpu_limit_keeps_measured_capacity")["verdict"] == "pass"  # no CPU limit
    models = run.result("test_deployment_shm_and_gpus_fit_the_models")
    assert _rules(models) == {"dev-shm": False, "gpu-limit": True}  # the demo's python models, no /dev/shm volume
    hpa = run.result("test_deployment_autoscaler_scales_on_exported_metrics")
    assert _rules(hpa) == {"hpa-metrics": False, "hpa-target": True}  # 50 us of queue time, within the p99 budget
    assert any("not exported by this server: avg_time_queue_us" in f["message"] for f in hpa["findings"])
    assert _rules(run.result("test_deployment_keeps_a_replica_through_drains_and_rollouts")) == {
        "replicas-and-disruption-budget": False}  # one replica (the HPA's minReplicas 1), no PodDisruptionBudget
    posture = run.result("test_deployment_image_pinned_non_root_models_read_only")
    assert _rules(posture) == {"image-pinned": True, "run-as-non-root": True, "model-repository-read-only": False,
                               "restricted-apis": False}  # the chart restricts no API
    assert _rules(run.result("test_deployment_model_control_mode_is_not_poll")) == {"model-control-mode": True}
    flags = run.result("test_deployment_runs_the_flags_this_run_measured")  # the chart's default mode is none
    assert _rules(flags) == {"measured-arguments": False}, (flags["verdict"], flags["reason"])
    assert any("--model-control-mode: the pod none, the server measured explicit" in f["message"]
               for f in flags["findings"]), flags["findings"]
    rollout = run.result("test_deployment_rollout_keeps_the_declared_peak")  # PERF-2 and OPS-2 did not run here
    assert rollout["verdict"] == "incomplete" and "test_throughput_latency_curve (PERF-2)" in rollout["reason"]
    assert any(f"{ONPREM} document 0: spec.template.spec.containers[0].volumeMounts[0].readOnly" in f["message"]
               for f in posture["findings"])


def test_a_memory_limit_below_the_soaks_peak_fails_naming_file_field_and_peak(run_checklist):
    twin = ONPREM.parent / "broken" / "memory-limit-below-peak.yaml"
    run = run_checklist("test_soak.py", DEPLOYMENT, url=None,
                        args=("--triton-launch=embedded", "-k", "soak_stability or memory_limit", "--triton-soak=8s",
                              f"--triton-deployment={twin}", "--triton-kubernetes-version=1.25.0"))
    memory = run.result("test_deployment_memory_limit_covers_measured_peak")
    assert memory["verdict"] == "fail" and _rules(memory)["memory-limit"] is False
    peak_mib = _value(memory, "memory-limit: peak server RSS (MiB)")
    assert peak_mib > 64  # the demo's server tree, measured by this run's soak, is above the twin's 64Mi limit
    finding = next(f["message"] for f in memory["findings"] if f["message"].startswith("memory-limit:"))
    assert finding.startswith(f"memory-limit: {twin} document 0: spec.template.spec.containers[0].resources.limits."
                              "memory: limit 0.06 GiB; measured peak ")


def test_a_cpu_limit_below_what_the_server_used_at_capacity_fails(run_checklist, tmp_path):
    deployment, hpa = yaml.safe_load_all(ONPREM.read_text())
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "100m"
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(yaml.safe_dump_all([deployment, hpa]))
    short = ("--triton-threshold=load_warmup_s=0.3", "--triton-threshold=load_window_s=0.4",
             "--triton-threshold=load_min_duration_s=1.2", "--triton-threshold=load_min_requests=30",
             "--triton-threshold=load_max_windows=6", "--triton-threshold=load_stability_tolerance=0.6",
             "--triton-threshold=curve_max_concurrency=8")
    config = tmp_path / "triton-ready.yaml"
    config.write_text("operations:\n  capacity:\n    peak_rate: {scale: 20}\n    fleet: {gpus: 1}\n")
    run = run_checklist("test_performance.py", "test_operations.py", DEPLOYMENT, url=None,
                        args=("--triton-launch=embedded", "--triton-models=scale", "--triton-slo-p99-ms=500",
                              "-k", "throughput_latency_curve or cpu_limit or capacity_plan or rollout",
                              f"--triton-deployment={manifest}", "--triton-kubernetes-version=1.25.0",
                              f"--triton-config={config}", *short))
    perf2 = run.result("test_throughput_latency_curve")
    used = _value(perf2, "server CPU at the capacity point")
    cpu = run.result("test_deployment_cpu_limit_keeps_measured_capacity")
    assert _value(cpu, "cpu-limit: CPU cores at capacity") == used
    assert cpu["verdict"] == "fail" and _rules(cpu) == {"cpu-limit": False}  # 0.1 cores cannot carry it
    assert any(f"limit 0.1 cores; {used:.2f} cores used by the server at PERF-2's capacity" in f["message"]
               for f in cpu["findings"])
    # one replica (the HPA's minReplicas), none unavailable in a rollout: PERF-2's capacity against OPS-2's 20 x 1.3
    rollout = run.result("test_deployment_rollout_keeps_the_declared_peak")
    capacity = run.report["facts"]["perf.capacity"]["scale"]["max_throughput_within_slo_infer_s"]
    assert rollout["verdict"] == ("pass" if capacity >= 26 else "fail"), rollout
    assert any(f"scale 1 x {capacity:.0f} infer/s against 26 needed" in j["measured"] for j in rollout["judgements"])
