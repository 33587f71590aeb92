"""The deployment, not only the server: the rendered manifests given with --triton-deployment
(docs/deployment.md) judged against what this run measured, each rule under the checklist item it
belongs to. The checks that read PERF-3's and PERF-4's measurements run in the operations phase,
after them. Without --triton-deployment every check here is NOT APPLICABLE, saying how to give one;
a rule whose measurement this run lacks makes its check INCOMPLETE naming it, never a pass."""

import pytest

from pytest_triton_ready.deployment.arguments import measured_arguments, model_control_mode, restricted_apis
from pytest_triton_ready.deployment.posture import (
    hpa_metrics,
    hpa_targets,
    judge_posture,
    replicas_and_disruption_budget,
    rollout_capacity,
)
from pytest_triton_ready.deployment.probes import judge_probes
from pytest_triton_ready.deployment.recording import (
    deployment_or_not_applicable,
    latency_budget,
    limits,
    record,
    required_restricted,
    run_measured,
    server_arguments,
)
from pytest_triton_ready.deployment.resources import judge_resources
from pytest_triton_ready.deployment.termination import judge_termination

pytestmark = pytest.mark.usefixtures("triton")


@pytest.mark.triton_check("PERF-4", phase="operations")
def test_deployment_probes_cover_measured_start(triton, triton_run, triton_facts, check):
    """The probes restart and route by the right endpoints, and the startup budget covers the measured start.

    Liveness asks /v2/health/live (never /v2/health/ready, which is not ready while a model loads);
    readiness asks /v2/health/ready or /v2/models/M/ready; the startupProbe's initialDelaySeconds +
    failureThreshold x periodSeconds (else the livenessProbe's) is at least PERF-4's measured
    start-to-ready time x (1 + deployment_startup_margin)."""
    manifest = deployment_or_not_applicable(check, triton_run)
    measured = run_measured(check, triton, triton_facts)
    record(check, [j for c in manifest.containers for j in judge_probes(c, measured, limits(check))])


@pytest.mark.triton_check("PERF-4", phase="operations")
def test_deployment_grace_period_covers_measured_drain(triton, triton_run, triton_facts, check):
    """terminationGracePeriodSeconds covers preStop + the measured drain, and exceeds preStop + --exit-timeout-secs.

    The grace period (Kubernetes' default 30 s) must be at least preStop + PERF-4's measured drain
    under traffic + deployment_grace_margin_s, and more than preStop + the server's
    --exit-timeout-secs (Triton's default 30 s), else the kubelet SIGKILLs a draining server (exit
    137); requests refused after SIGTERM need a preStop delay of at least the readiness probe's
    detection time (periodSeconds x failureThreshold)."""
    manifest = deployment_or_not_applicable(check, triton_run)
    measured = run_measured(check, triton, triton_facts)
    record(check, [j for c in manifest.containers for j in judge_termination(c, measured, limits(check))])


@pytest.mark.triton_check("CFG-4", phase="operations")
def test_deployment_memory_limit_covers_measured_peak(triton, triton_run, triton_facts, check):
    """The memory limit is above the measured peak with headroom and outlasts the horizon at the soak's slope.

    limits.memory >= PERF-3's peak RSS of the server's process tree x (1 + deployment_memory_headroom);
    (limit - peak) / the soak's fitted slope >= deployment_memory_horizon_h (a soak shorter than
    soak_leak_min_duration_s has no slope to judge: INCOMPLETE); requests.memory <= limits.memory."""
    manifest = deployment_or_not_applicable(check, triton_run)
    measured = run_measured(check, triton, triton_facts)
    record(check, [j for c in manifest.containers for j in judge_resources(c, measured, limits(check))["memory"]])


@pytest.mark.triton_check("CFG-4", phase="operations")
def test_deployment_cpu_limit_keeps_measured_capacity(triton, triton_run, triton_facts, check):
    """The CPU limit does not throttle the capacity PERF-2 measured.

    Without a CPU limit nothing throttles the server; with one, it must be at least the CPU the
    server used at PERF-2's capacity x (1 + deployment_cpu_headroom), and where that use was not
    measured the check is INCOMPLETE: the report's capacity then holds only outside the limit."""
    manifest = deployment_or_not_applicable(check, triton_run)
    measured = run_measured(check, triton, triton_facts)
    record(check, [j for c in manifest.containers for j in judge_resources(c, measured, limits(check))["cpu"]])


@pytest.mark.triton_check("CFG-4")
def test_deployment_shm_and_gpus_fit_the_models(triton, triton_run, triton_facts, check):
    """Python backend models get a memory-backed /dev/shm, and KIND_GPU instance groups get their GPUs.

    A model in scope on the python backend needs /dev/shm mounted from an emptyDir with medium
    Memory (sizeLimit, if set, at least deployment_shm_min_mib); limits nvidia.com/gpu must be at
    least the GPUs the KIND_GPU instance groups of the served models reference."""
    manifest = deployment_or_not_applicable(check, triton_run)
    measured = run_measured(check, triton, triton_facts)
    record(check, [j for c in manifest.containers for j in judge_resources(c, measured, limits(check))["models"]])


@pytest.mark.triton_check("MON-1")
def test_deployment_autoscaler_scales_on_exported_metrics(triton, triton_run, triton_facts, triton_settings, check):
    """Every HorizontalPodAutoscaler metric of the workload is exported by the server, and a latency target is within the SLO.

    Each Pods, Object or External metric must be a name in this server's /metrics, or the name a
    metrics-adapter rule in the manifests derives from one (an autoscaler on a metric that does not
    exist never scales); a latency metric's target (a name or series ending in _us, _ms, _seconds)
    must be below the smallest p99 budget of the models in scope. A workload without an autoscaler
    is NOT APPLICABLE."""
    manifest = deployment_or_not_applicable(check, triton_run)
    measured = run_measured(check, triton, triton_facts)
    budget, source = latency_budget(triton_settings, triton.models())
    judgements = [j for c in manifest.containers
                  for j in [*hpa_metrics(manifest, c, measured), *hpa_targets(manifest, c, budget, source)]]
    if not judgements:
        check.not_applicable(f"{manifest.path}: no HorizontalPodAutoscaler scales the Triton workload")
    record(check, judgements)


@pytest.mark.triton_check("OPS-2")
def test_deployment_keeps_a_replica_through_drains_and_rollouts(triton_run, check):
    """At least two replicas and a PodDisruptionBudget keep a replica serving through drains and rollouts.

    spec.replicas (or the autoscaler's minReplicas, where one scales the workload) is at least 2, and
    a PodDisruptionBudget selects the pods: with one replica, every node drain, rollout and restart
    is an outage for as long as the models take to load."""
    manifest = deployment_or_not_applicable(check, triton_run)
    record(check, [replicas_and_disruption_budget(manifest, c) for c in manifest.containers])


@pytest.mark.triton_check("OPS-2", run_last=True)
def test_deployment_rollout_keeps_the_declared_peak(triton, triton_run, triton_facts, check):
    """During a rolling update the replicas left serving carry the declared peak of every model.

    (replicas, or the autoscaler's minReplicas, - maxUnavailable, Kubernetes' default 25% rounded
    down) x PERF-2's capacity within SLO of one replica (the server under test) must reach OPS-2's
    declared peak with headroom for every model; a Recreate strategy serves nothing meanwhile.
    Without PERF-2's capacity or OPS-2's plan (operations.peak) the check is INCOMPLETE."""
    manifest = deployment_or_not_applicable(check, triton_run)
    measured = run_measured(check, triton, triton_facts)
    record(check, [rollout_capacity(manifest, c, measured) for c in manifest.containers])


@pytest.mark.triton_check("OPS-1")
def test_deployment_model_control_mode_is_not_poll(triton_run, check):
    """The container's --model-control-mode is none or explicit, never poll.

    Poll mode loads whatever appears in the repository (half-copied files included) with no
    rehearsed step; Triton's documentation calls it not recommended for production."""
    manifest = deployment_or_not_applicable(check, triton_run)
    record(check, [model_control_mode(c) for c in manifest.containers])


@pytest.mark.triton_check("OPS-1")
def test_deployment_runs_the_flags_this_run_measured(triton, triton_run, check):
    """The pod runs the tritonserver flags the server this run measured ran.

    --model-control-mode, --exit-timeout-secs, --log-format, --strict-readiness and the restricted
    API categories are the same in the manifest's container and on the measured server (Triton's
    defaults where a command line leaves one out): a check that depends on a differing flag judged
    another server than the pod will run. An attached server's command line is not known: INCOMPLETE."""
    manifest = deployment_or_not_applicable(check, triton_run)
    arguments, why = server_arguments(triton)
    record(check, [measured_arguments(c, arguments, why) for c in manifest.containers])


@pytest.mark.triton_check("SEC-1")
def test_deployment_image_pinned_non_root_models_read_only(triton_run, triton_settings, check):
    """The image is pinned, the container cannot run as root, the models are read-only and the APIs restricted.

    The image names a digest or a tag other than latest; runAsNonRoot is true or runAsUser is not 0
    (container or pod); the volume holding --model-repository is mounted readOnly: true; the
    container's --http-restricted-api and --grpc-restricted-protocol restrict every API category
    SEC-1 requires (security.restricted_apis) on each protocol the server serves."""
    manifest = deployment_or_not_applicable(check, triton_run)
    required = required_restricted(triton_settings)
    record(check, [j for c in manifest.containers for j in [*judge_posture(c), restricted_apis(c, required)]])
