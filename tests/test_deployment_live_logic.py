"""--triton-deployment=k8s://NAMESPACE/NAME (deployment/live.py): the live objects read with the
official kubernetes client through a kubeconfig, here from an API endpoint on loopback that answers
the client's requests with the objects of Triton's k8s-onprem chart in the shape an API server
returns them (no cluster exists on these machines); then judged by the same rules."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from test_deployment_rules_logic import LIMITS, MEASURED

from pytest_triton_ready.deployment.live import parse_live
from pytest_triton_ready.deployment.manifest import read_manifest
from pytest_triton_ready.deployment.posture import replicas_and_disruption_budget
from pytest_triton_ready.deployment.probes import judge_probes
from pytest_triton_ready.deployment.reading import DeploymentError
from pytest_triton_ready.settings.options import _deployment

ONPREM = Path(__file__).parent / "data" / "deployments" / "k8s-onprem.yaml"
SOURCE = "k8s://default/example-triton-inference-server"


def _quantities_as_strings(node):
    """The API server writes every quantity as a string (`nvidia.com/gpu: "1"`, `averageValue: "50"`)."""
    if isinstance(node, dict):
        return {k: ({n: str(v) for n, v in value.items()} if k in ("limits", "requests") and isinstance(value, dict)
                    else str(value) if k == "averageValue" else _quantities_as_strings(value))
                for k, value in node.items()}
    if isinstance(node, list):
        return [_quantities_as_strings(item) for item in node]
    return node


def _served(body: dict, kind: str) -> dict:
    """An object as the API server returns it: the fields it adds beside the manifest's."""
    body = _quantities_as_strings(body)
    metadata = {**body["metadata"], "uid": "5b0c6c1e-4f2a-4a57-9a8e-2f1d3c4b5a69", "resourceVersion": "81234",
                "generation": 1, "creationTimestamp": "2026-12-01T09:00:00Z"}
    return {**body, "metadata": metadata, "status": {} if kind == "Deployment" else {"currentReplicas": 1,
                                                                                    "desiredReplicas": 1}}


def _objects() -> dict[str, dict]:
    deployment, hpa = [d for d in yaml.safe_load_all(ONPREM.read_text()) if d]
    hpa = {**_served(hpa, "HorizontalPodAutoscaler"), "apiVersion": "autoscaling/v2"}
    hpa.pop("kind")  # a list's items carry no kind of their own
    hpa.pop("apiVersion")
    return {
        "/apis/apps/v1/namespaces/default/deployments/example-triton-inference-server": _served(deployment,
                                                                                                 "Deployment"),
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers": {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscalerList", "metadata": {}, "items": [hpa]},
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets": {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudgetList", "metadata": {}, "items": []},
    }


@pytest.fixture
def api_server(tmp_path, monkeypatch):
    """An HTTP endpoint answering the API paths of `objects` (404 Status otherwise), and a
    kubeconfig whose current context points at it."""
    objects: dict[str, dict] = _objects()
    refuse: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            status, body = (refuse[0], {"kind": "Status", "code": refuse[0], "reason": "Forbidden"}) if refuse else (
                (200, objects[path]) if path in objects else
                (404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "test", "user": {"token": "recorded"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield refuse
    server.shutdown()


def test_the_live_chart_is_read_through_the_client_and_judged_as_its_rendering_is(api_server):
    manifest = read_manifest(SOURCE, "1.30.0")
    (container,) = manifest.containers
    assert [d.kind for d in manifest.documents] == ["Deployment", "HorizontalPodAutoscaler"]
    assert container.field_prefix == "spec.template.spec.containers[0]"
    probes = {j.rule: j for j in judge_probes(container, MEASURED, LIMITS)}
    assert probes["startup-budget"].verdict == "pass" and probes["startup-budget"].manifest_value == 300
    assert probes["liveness-path"].file == f"{SOURCE} document 0"
    budget = replicas_and_disruption_budget(manifest, container)
    assert budget.verdict == "fail" and "no PodDisruptionBudget selects the pods" in budget.message


def test_no_such_workload_a_refused_read_and_no_cluster_are_one_line_each(api_server, tmp_path, monkeypatch):
    with pytest.raises(DeploymentError, match="^k8s://default/nothing: no Deployment, StatefulSet, DaemonSet or "
                                              "InferenceService named nothing in namespace default$"):
        read_manifest("k8s://default/nothing", "1.30.0")
    api_server.append(403)
    with pytest.raises(DeploymentError, match=f"^{SOURCE}: the API server answered 403 Forbidden"):
        read_manifest(SOURCE, "1.30.0")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(DeploymentError, match=f"^{SOURCE}: no Kubernetes context to read it with"):
        read_manifest(SOURCE, "1.30.0")


def test_the_option_takes_a_path_or_a_live_workload():
    assert _deployment("rendered.yaml") == Path("rendered.yaml")
    assert _deployment(SOURCE) == SOURCE
    assert parse_live(SOURCE) == ("default", "example-triton-inference-server")
    with pytest.raises(ValueError, match="expected k8s://NAMESPACE/NAME"):
        _deployment("k8s://Default")
