"""--triton-deployment and its YAML key and environment variable; an invalid manifest is refused
before any check, with one line naming file, document and field, exit code 4."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_triton_ready.deployment.manifest import read_manifest
from pytest_triton_ready.deployment.reading import DeploymentError
from pytest_triton_ready.policy import plan_block
from pytest_triton_ready.settings import SettingsError, build_settings

ONPREM = Path(__file__).parent / "data" / "deployments" / "k8s-onprem.yaml"


def test_the_deployment_comes_from_cli_env_or_yaml_with_its_kubernetes_version(tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text(f"deployment:\n  manifests: {ONPREM}\n  kubernetes_version: 1.25.0\n")
    from_yaml = build_settings({}, {}, environ={}, config_file=str(config))
    assert (from_yaml.triton_deployment, from_yaml.triton_kubernetes_version) == (ONPREM, "1.25.0")
    from_env = build_settings({}, {}, environ={"TRITON_READY_DEPLOYMENT": "rendered.yaml"})
    assert from_env.triton_deployment == Path("rendered.yaml") and from_env.triton_kubernetes_version == "1.30.0"
    assert build_settings({"triton_deployment": "a.yaml"}, {}, environ={}).sources["triton_deployment"] == "cli"
    with pytest.raises(SettingsError, match=r"--triton-kubernetes-version from cli: expected a Kubernetes version"):
        build_settings({"triton_kubernetes_version": "latest"}, {}, environ={})


def test_the_chart_reads_at_a_version_that_serves_its_hpa_and_a_manifest_without_triton_is_refused(tmp_path):
    manifest = read_manifest(ONPREM, "1.25.0")
    assert [c.container["name"] for c in manifest.containers] == ["triton-inference-server"]
    assert [d.kind for d in manifest.of_kind("HorizontalPodAutoscaler")] == ["HorizontalPodAutoscaler"]
    service = tmp_path / "service.yaml"
    service.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}))
    with pytest.raises(DeploymentError, match=r"service\.yaml: no Triton container .* the documents are: Service"):
        read_manifest(service, "1.30.0")


def test_an_invalid_manifest_stops_the_run_with_one_line_and_exit_code_4(tmp_path):
    deployment, _ = yaml.safe_load_all(ONPREM.read_text())
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["periodSeconds"] = "ten"
    broken = tmp_path / "rendered.yaml"
    broken.write_text(yaml.safe_dump(deployment))
    result = subprocess.run([sys.executable, "-m", "pytest_triton_ready.cli", "--triton-url=http://127.0.0.1:1",
                             f"--triton-deployment={broken}"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if "triton-ready:" in line]
    assert lines == [f"ERROR: triton-ready: --triton-deployment from cli: {broken} document 0 (Deployment): field "
                     "spec.template.spec.containers.0.livenessProbe.periodSeconds: 'ten' is not of type 'integer', 'null' "
                     "(Kubernetes 1.30.0 schema)"]


def test_the_run_plan_names_the_deployment_and_its_kubernetes_version():
    text = plan_block(build_settings({"triton_deployment": str(ONPREM), "triton_kubernetes_version": "1.25.0"}, {},
                                     environ={}))
    assert f"  deployment: {ONPREM} (Kubernetes 1.25.0 schemas), its probes, grace period and limits judged" in text
    assert "deployment:" not in plan_block(build_settings({}, {}, environ={}))


def test_the_container_launchers_plan_shows_the_limits_of_the_manifest_the_run_read():
    from pytest_triton_ready.deployment.manifest import read_manifest

    settings = build_settings({"triton_deployment": str(ONPREM), "triton_kubernetes_version": "1.25.0",
                               "triton_launch": "container", "triton_image": "nvcr.io/nvidia/tritonserver:24.10-py3"},
                              {}, environ={})
    text = plan_block(settings, deployment=read_manifest(ONPREM, "1.25.0"))
    assert "  container inside the deployment's limits: no memory limit, no CPU limit, /dev/shm 64 MiB" in text
    assert "    not carried over: --model-repository=/models: the launcher serves" in text
    assert "container inside" not in plan_block(settings)  # no manifest given: nothing read again here
