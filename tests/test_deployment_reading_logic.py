"""Reading and validating rendered manifests: Triton's own k8s-onprem chart (rendered with its
defaults, tests/data/deployments/README.md) and broken twins made from it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_triton_ready.deployment.reading import DeploymentError, read_documents, triton_containers
from pytest_triton_ready.deployment.validation import built_in, validate

ONPREM = Path(__file__).parent / "data" / "deployments" / "k8s-onprem.yaml"


def _write(tmp_path: Path, documents: list[dict], name: str = "rendered.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(documents))
    return path


def test_the_charts_triton_container_is_found_with_its_arguments_and_field():
    documents = read_documents(ONPREM)
    assert [d.kind for d in documents] == ["Deployment", "HorizontalPodAutoscaler"]
    (container,) = triton_containers(documents)
    assert container.field_prefix == "spec.template.spec.containers[0]"
    assert container.args == ["tritonserver", "--model-repository=/models"]
    assert container.container["startupProbe"]["failureThreshold"] == 30


def test_a_folder_is_read_file_by_file_and_a_sidecar_is_not_taken_for_triton(tmp_path):
    deployment, _ = yaml.safe_load_all(ONPREM.read_text())
    sidecar = {"name": "log-shipper", "image": "fluent/fluent-bit:3.0"}
    deployment["spec"]["template"]["spec"]["containers"].insert(0, sidecar)
    _write(tmp_path, [deployment], "b.yaml")
    _write(tmp_path, [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}], "a.yml")
    documents = read_documents(tmp_path)
    assert [d.path.name for d in documents] == ["a.yml", "b.yaml"]
    (container,) = triton_containers(documents)
    assert container.field_prefix == "spec.template.spec.containers[1]"


def test_the_charts_deployment_is_valid_and_its_hpa_api_is_refused_by_a_current_kubernetes():
    deployment, hpa = read_documents(ONPREM)
    validate([deployment], "1.30.0")
    with pytest.raises(DeploymentError) as error:
        validate([deployment, hpa], "1.30.0")
    assert str(error.value) == (f"{ONPREM} document 1 (HorizontalPodAutoscaler): field apiVersion: autoscaling/v2beta2 "
                                "HorizontalPodAutoscaler is not served by Kubernetes 1.30.0")


def test_an_invalid_field_is_named_with_file_document_and_path(tmp_path):
    deployment, _ = yaml.safe_load_all(ONPREM.read_text())
    deployment["spec"]["replicas"] = "two"
    path = _write(tmp_path, [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"}}, deployment])
    with pytest.raises(DeploymentError, match=r"rendered\.yaml document 1 \(Deployment\): field spec\.replicas: "
                                              r"'two' is not of type"):
        validate(read_documents(path))


def test_a_custom_resource_has_no_official_schema_and_is_not_refused(tmp_path):
    service = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "t"},
               "spec": {"predictor": {"triton": {"storageUri": "gs://bucket/models"}}}}
    validate(read_documents(_write(tmp_path, [service])))
    assert built_in("autoscaling/v2") and built_in("v1") and built_in("networking.k8s.io/v1")
    assert not built_in("serving.kserve.io/v1beta1")


def test_unreadable_input_is_one_line_naming_the_file(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Deployment\nspec: [unclosed\n")
    with pytest.raises(DeploymentError, match=r"broken\.yaml: cannot read: ") as error:
        read_documents(broken)
    assert "\n" not in str(error.value)
    with pytest.raises(DeploymentError, match=r"missing\.yaml: cannot read: .*No such file"):
        read_documents(tmp_path / "missing.yaml")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DeploymentError, match=r"empty: no manifests \(\*\.yaml\) found"):
        read_documents(tmp_path / "empty")
    with pytest.raises(DeploymentError, match=r"Kubernetes 1\.2\.0: no schemas for it"):
        validate([], "1.2.0")
