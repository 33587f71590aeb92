"""The live deployment, `--triton-deployment=k8s://NAMESPACE/NAME`: the objects a cluster holds,
read with the official kubernetes client through the current kubeconfig context (KUBECONFIG, else
~/.kube/config; in a pod, its service account), in the shape the rules read from rendered files.

NAME is a Deployment, StatefulSet or DaemonSet, else a KServe InferenceService (with the
ServingRuntimes of the namespace and the ClusterServingRuntimes); beside it, the namespace's
HorizontalPodAutoscalers and PodDisruptionBudgets (the rules pick those that select it). The API
server has validated these objects already: no schema is applied again. A prometheus-adapter's
rules live in another namespace and are not read: an HPA on an adapter name is judged as unknown.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .reading import DeploymentError, Document

LIVE = re.compile(r"^k8s://(?P<namespace>[a-z0-9]([-a-z0-9]*[a-z0-9])?)/(?P<name>[a-z0-9]([-.a-z0-9]*[a-z0-9])?)$")
WORKLOADS = (("Deployment", "read_namespaced_deployment"), ("StatefulSet", "read_namespaced_stateful_set"),
             ("DaemonSet", "read_namespaced_daemon_set"))
KSERVE = ("serving.kserve.io", "v1beta1")
SERVING_RUNTIMES, CLUSTER_SERVING_RUNTIMES = ("servingruntimes", "ServingRuntime"), ("clusterservingruntimes",
                                                                                      "ClusterServingRuntime")


def is_live(source: object) -> bool:
    return isinstance(source, str) and source.startswith("k8s://")


def parse_live(source: str) -> tuple[str, str]:
    """(namespace, name) of k8s://NAMESPACE/NAME; ValueError naming the form otherwise."""
    match = LIVE.match(source)
    if not match:
        raise ValueError(f"expected k8s://NAMESPACE/NAME (lower-case DNS names), got {source!r}")
    return match["namespace"], match["name"]


def live_documents(source: str, api_client: Any = None) -> list[Document]:
    """The live objects of k8s://NAMESPACE/NAME as documents; DeploymentError in one line where the
    cluster cannot be reached, refuses the read, or holds no such workload."""
    namespace, name = parse_live(source)
    try:
        from kubernetes import client, config
        from kubernetes.client.exceptions import ApiException
    except ImportError:
        raise DeploymentError(f"{source}: reading a live deployment needs the kubernetes client: "
                              "pip install 'pytest-triton-ready[kubernetes]'") from None
    if api_client is None:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            try:
                config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))  # read now, not at import
            except (config.ConfigException, OSError) as error:
                raise DeploymentError(f"{source}: no Kubernetes context to read it with: {error}") from None
        api_client = client.ApiClient()
    try:
        bodies = _read(client, api_client, namespace, name, ApiException)
    except DeploymentError:
        raise
    except ApiException as error:
        raise DeploymentError(f"{source}: the API server answered {error.status} {error.reason}".strip()) from None
    except Exception as error:  # urllib3's connection errors: the cluster does not answer
        raise DeploymentError(f"{source}: the API server does not answer: {' '.join(str(error).split())[:200]}") from None
    return [Document(source, index, body) for index, body in enumerate(bodies)]  # type: ignore[arg-type]


def _read(client: Any, api_client: Any, namespace: str, name: str, not_found: type) -> list[dict[str, Any]]:
    plain = api_client.sanitize_for_serialization
    apps = client.AppsV1Api(api_client)
    found: list[dict[str, Any]] = []
    for kind, read in WORKLOADS:
        try:
            found = [_typed(plain(getattr(apps, read)(name, namespace)), "apps/v1", kind)]
            break
        except not_found as error:
            if error.status != 404:
                raise
    if not found:
        found = _inference_service(client, api_client, namespace, name, not_found)
    autoscalers = client.AutoscalingV2Api(api_client).list_namespaced_horizontal_pod_autoscaler(namespace)
    budgets = client.PolicyV1Api(api_client).list_namespaced_pod_disruption_budget(namespace)
    return (found + [_typed(plain(h), "autoscaling/v2", "HorizontalPodAutoscaler") for h in autoscalers.items]
            + [_typed(plain(b), "policy/v1", "PodDisruptionBudget") for b in budgets.items])


def _inference_service(client: Any, api_client: Any, namespace: str, name: str, not_found: type) -> list[dict]:
    custom = client.CustomObjectsApi(api_client)
    group, version = KSERVE
    try:
        service = custom.get_namespaced_custom_object(group, version, namespace, "inferenceservices", name)
    except not_found as error:
        if error.status != 404:
            raise
        raise DeploymentError(f"k8s://{namespace}/{name}: no Deployment, StatefulSet, DaemonSet or InferenceService "
                              f"named {name} in namespace {namespace}") from None
    runtimes = custom.list_namespaced_custom_object(group, "v1alpha1", namespace, SERVING_RUNTIMES[0])["items"]
    cluster = custom.list_cluster_custom_object(group, "v1alpha1", CLUSTER_SERVING_RUNTIMES[0])["items"]
    return ([service] + [_typed(r, f"{group}/v1alpha1", SERVING_RUNTIMES[1]) for r in runtimes]
            + [_typed(r, f"{group}/v1alpha1", CLUSTER_SERVING_RUNTIMES[1]) for r in cluster])


def _typed(body: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """An object of a list carries no apiVersion and kind of its own: they are the list's."""
    return {"apiVersion": body.get("apiVersion") or api_version, "kind": body.get("kind") or kind, **body}
