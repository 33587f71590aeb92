"""KServe InferenceServices read through their runtime: KServe's own kserve-tritonserver
ClusterServingRuntime and its triton samples (tests/data/deployments/kserve, each naming its source
commit), merged as KServe merges them and judged by the same rules as a Deployment."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_deployment_rules_logic import LIMITS, MEASURED, RULES, _recorder, judge_all

from pytest_triton_ready.deployment.arguments import model_control_mode
from pytest_triton_ready.deployment.judgement import FAIL, NOT_APPLICABLE, PASS, Measured
from pytest_triton_ready.deployment.manifest import read_manifest
from pytest_triton_ready.deployment.posture import replicas_and_disruption_budget, rollout_capacity
from pytest_triton_ready.deployment.reading import DeploymentError, read_documents
from pytest_triton_ready.deployment.recording import record
from pytest_triton_ready.deployment.termination import grace_covers_drain, grace_s

KSERVE = Path(__file__).parent / "data" / "deployments" / "kserve"
RUNTIME = KSERVE / "kserve-tritonserver.yaml"
BERT = KSERVE / "bert_v1beta1.yaml"
TORCHSCRIPT = KSERVE / "torchscript.yaml"
RUNTIME_ARGS = ["tritonserver", "--model-store=/mnt/models", "--grpc-port=9000", "--http-port=8080",
                "--allow-grpc=true", "--allow-http=true"]
RUNTIME_FIELD = "ClusterServingRuntime kserve-tritonserver ({path} document 0) spec.containers[0]"


def _sample(name: Path) -> dict:
    return yaml.safe_load(name.read_text())


def _deployment(tmp_path: Path, service: dict | Path, runtime: bool = True) -> Path:
    """The runtime (as fetched) and one InferenceService in one rendered file."""
    text = service.read_text() if isinstance(service, Path) else yaml.safe_dump(service)
    path = tmp_path / "rendered.yaml"
    path.write_text((RUNTIME.read_text() + "\n---\n" if runtime else "") + text)
    return path


def _container(path: Path):
    (container,) = read_manifest(path, "1.30.0").containers
    return container


def _predictor(service: dict) -> dict:
    return service["spec"]["predictor"]["triton"]


def test_kserves_runtime_and_sample_pass_validation_and_merge_into_one_triton_container(tmp_path):
    path = _deployment(tmp_path, BERT)
    assert [d.kind for d in read_documents(path)] == ["ClusterServingRuntime", "InferenceService"]
    container = _container(path)  # Kubernetes 1.30 validation skips both custom resources
    assert container.source == "KServe" and container.document.kind == "InferenceService"
    assert container.container["image"] == "nvcr.io/nvidia/tritonserver:23.10-py3"  # the sample's runtimeVersion
    assert container.args == RUNTIME_ARGS
    assert container.container["securityContext"]["runAsNonRoot"] is True  # the runtime's, kept
    assert container.container["resources"] == {"limits": {"cpu": "1", "memory": "8Gi"},
                                                "requests": {"cpu": "1", "memory": "8Gi"}}


def test_the_predictors_args_are_appended_and_named_where_they_are_written(tmp_path):
    service = _sample(BERT)
    _predictor(service)["args"] = ["--model-control-mode=poll"]
    path = _deployment(tmp_path, service)
    container = _container(path)
    assert container.args == [*RUNTIME_ARGS, "--model-control-mode=poll"]
    judged = model_control_mode(container)
    assert judged.verdict == FAIL and judged.field == "spec.predictor.triton.args[0]"
    assert judged.file == f"{path} document 1"


def test_resources_merge_per_key_and_each_finding_names_the_field_that_holds_it(tmp_path):
    service = _sample(BERT)
    _predictor(service)["resources"] = {"limits": {"memory": "4Gi"}}
    path = _deployment(tmp_path, service)
    container = _container(path)
    assert container.container["resources"] == {"limits": {"cpu": "1", "memory": "4Gi"},
                                                "requests": {"cpu": "1", "memory": "2Gi"}}
    judged = judge_all(path)
    assert judged["memory-limit"].field == "spec.predictor.triton.resources.limits.memory"
    assert judged["memory-limit"].manifest_value == "4.00 GiB" and judged["memory-request"].verdict == PASS
    runtime = RUNTIME_FIELD.format(path=path)
    assert judged["memory-request"].field == f"{runtime}.resources.requests.memory"
    assert judged["run-as-non-root"].verdict == PASS and judged["run-as-non-root"].field == f"{runtime}.securityContext"
    assert judged["image-pinned"].field == "spec.predictor.triton.runtimeVersion"


def test_the_unchanged_sample_is_judged_on_every_rule_the_rollout_one_not_applicable(tmp_path):
    judged = judge_all(_deployment(tmp_path, BERT))
    assert set(judged) == RULES - {"hpa-metrics"}  # KServe renders its autoscaler itself
    rollout = judged["rollout-capacity"]
    assert rollout.verdict == NOT_APPLICABLE and rollout.field == "spec.predictor"
    assert rollout.message.startswith("KServe has no equivalent of spec.strategy: KServe rolls a predictor out as a "
                                      "new revision beside the old one (Serverless)")
    replicas = judged["replicas-and-disruption-budget"]
    assert replicas.verdict == FAIL and replicas.field == "spec.predictor.minReplicas" and replicas.manifest_value == 1
    assert judged["liveness-path"].verdict == FAIL  # the runtime declares no probe
    assert judged["liveness-path"].field == "spec.predictor.triton.livenessProbe"


def test_rollout_is_not_applicable_with_every_measurement_and_min_replicas_meet_a_budget(tmp_path):
    container = _container(_deployment(tmp_path, BERT))
    manifest = read_manifest(_deployment(tmp_path, BERT), "1.30.0")
    measured = Measured(replica_capacity={"bert": 100.0}, required_at_peak={"bert": 1000.0})
    judged = rollout_capacity(manifest, container, measured)
    assert judged.verdict == NOT_APPLICABLE and judged.fix is None
    two = _sample(BERT)
    two["spec"]["predictor"]["minReplicas"] = 2
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "bert"},
              "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"serving.kserve.io/inferenceservice": "bert-v2",
                                                                          "component": "predictor"}}}}
    path = _deployment(tmp_path, two)
    path.write_text(path.read_text() + "\n---\n" + yaml.safe_dump(budget))
    judged = replicas_and_disruption_budget(read_manifest(path, "1.30.0"), _container(path))
    assert judged.verdict == PASS and judged.manifest_value == 2 and "PodDisruptionBudget 'bert'" in judged.message


def test_the_rollout_check_on_an_inference_service_is_not_applicable_saying_why(tmp_path):
    path = _deployment(tmp_path, BERT)
    manifest = read_manifest(path, "1.30.0")
    check = _recorder()
    with pytest.raises(pytest.skip.Exception, match="not applicable"):
        record(check, [rollout_capacity(manifest, c, MEASURED) for c in manifest.containers])
    assert check.result.verdict.value == "not_applicable"
    assert check.result.reason.startswith("KServe has no equivalent of spec.strategy: ")
    assert not check.result.recommendations


def test_serverless_grace_period_is_knatives_timeout_and_raw_deployment_the_pods(tmp_path):
    serverless = _container(_deployment(tmp_path, TORCHSCRIPT))
    assert grace_s(serverless) == (300.0, False)
    judged = grace_covers_drain(serverless, MEASURED, LIMITS)
    assert judged.verdict == PASS and judged.field == "spec.predictor.timeout"
    assert ("terminationGracePeriodSeconds 300 s (Knative's revision timeoutSeconds in KServe's Serverless mode: "
            "its default)") in judged.message
    timed = _sample(TORCHSCRIPT)
    timed["spec"]["predictor"].update(timeout=4, terminationGracePeriodSeconds=600)
    short = grace_covers_drain(_container(_deployment(tmp_path, timed)), MEASURED, LIMITS)
    assert short.verdict == FAIL and short.manifest_value == 4 and short.field == "spec.predictor.timeout"
    raw = _sample(TORCHSCRIPT)
    raw["metadata"]["annotations"] = {"serving.kserve.io/deploymentMode": "RawDeployment"}
    unset = _container(_deployment(tmp_path, raw))
    assert grace_s(unset) == (30.0, False)
    assert "30 s (Kubernetes' default: KServe's RawDeployment mode" in grace_covers_drain(unset, MEASURED, LIMITS).message
    raw["spec"]["predictor"]["terminationGracePeriodSeconds"] = 45
    judged = grace_covers_drain(_container(_deployment(tmp_path, raw)), MEASURED, LIMITS)
    assert judged.manifest_value == 45 and judged.field == "spec.predictor.terminationGracePeriodSeconds"


def test_the_storage_uri_is_mounted_read_only_unless_annotated(tmp_path):
    judged = judge_all(_deployment(tmp_path, TORCHSCRIPT))["model-repository-read-only"]
    assert judged.verdict == PASS and judged.field == "metadata.annotations.storage.kserve.io/readonly"
    assert "--model-repository=/mnt/models is volume 'kserve-provision-location'" in judged.message
    writable = _sample(TORCHSCRIPT)
    writable["metadata"]["annotations"] = {"storage.kserve.io/readonly": "false"}
    judged = judge_all(_deployment(tmp_path, writable))["model-repository-read-only"]
    assert judged.verdict == FAIL and judged.field == "metadata.annotations.storage.kserve.io/readonly"


def test_the_torchscript_samples_env_merges_by_name_and_its_image_takes_the_runtime_version(tmp_path):
    container = _container(_deployment(tmp_path, TORCHSCRIPT))
    assert container.container["image"] == "nvcr.io/nvidia/tritonserver:21.08-py3"
    assert container.container["env"] == [{"name": "OMP_NUM_THREADS", "value": "1"}]


def test_a_model_format_the_runtime_auto_selects_is_read_as_triton(tmp_path):
    service = _sample(BERT)
    triton = service["spec"]["predictor"].pop("triton")
    service["spec"]["predictor"]["model"] = {**triton, "modelFormat": {"name": "onnx"}}
    container = _container(_deployment(tmp_path, service))
    assert container.field_prefix == "spec.predictor.model" and container.args == RUNTIME_ARGS
    service["spec"]["predictor"]["model"]["modelFormat"] = {"name": "sklearn"}
    with pytest.raises(DeploymentError, match="no Triton container"):
        read_manifest(_deployment(tmp_path, service), "1.30.0")


def test_a_missing_runtime_is_one_line_naming_file_document_and_field(tmp_path):
    path = _deployment(tmp_path, BERT, runtime=False)
    with pytest.raises(DeploymentError) as error:
        read_manifest(path, "1.30.0")
    assert str(error.value) == (
        f"{path} document 0 (InferenceService bert-v2): field spec.predictor.triton: no runtime in the manifests "
        "auto-selects model format triton: render the ServingRuntime or ClusterServingRuntime with the rest "
        "(KServe's config/runtimes/kserve-tritonserver.yaml)")
    named = _sample(BERT)
    named["spec"]["predictor"] = {"model": {"modelFormat": {"name": "triton"}, "runtime": "my-triton"}}
    with pytest.raises(DeploymentError, match=r"document 1 \(InferenceService bert-v2\): field spec\.predictor\.model: "
                                              r"its runtime my-triton is not in the manifests") as error:
        read_manifest(_deployment(tmp_path, named), "1.30.0")
    assert "\n" not in str(error.value)
