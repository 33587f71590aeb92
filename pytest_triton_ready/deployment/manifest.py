"""The deployment given with --triton-deployment: its documents read, the Kubernetes ones validated
against one Kubernetes version (a compose file is read by compose.py, which refuses a wrong type
naming the field), and its Triton containers found; any problem is one DeploymentError line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .compose import compose_containers, is_compose
from .kserve import kserve_containers
from .live import is_live, live_documents
from .reading import DeploymentError, Document, TritonContainer, read_documents, triton_containers
from .validation import validate


@dataclass(frozen=True)
class Manifest:
    """Every document of the deployment and the Triton containers among them."""

    path: Path
    kubernetes_version: str
    documents: list[Document]
    containers: list[TritonContainer]

    def of_kind(self, kind: str) -> list[Document]:
        return [document for document in self.documents if document.kind == kind]


def read_manifest(path: Path | str, kubernetes_version: str) -> Manifest:
    """The deployment at `path`, valid for `kubernetes_version`, with at least one Triton container:
    a workload's, an InferenceService's merged with its runtime (kserve.py), or a compose
    service's (compose.py); `k8s://NAMESPACE/NAME`: the live objects of a cluster (live.py)."""
    if is_live(path):  # objects the API server holds, validated by it
        documents = live_documents(str(path))
    else:
        documents = read_documents(path)
        validate([d for d in documents if not is_compose(d)], kubernetes_version)
    containers = triton_containers(documents) + kserve_containers(documents) + compose_containers(documents)
    if not containers:
        kinds = ", ".join(sorted({"compose file" if is_compose(d) else d.kind or "no kind" for d in documents}))
        raise DeploymentError(f"{path}: no Triton container (command, args or image naming tritonserver) in any "
                              "Deployment, StatefulSet, DaemonSet, Pod, InferenceService or compose service; the "
                              f"documents are: {kinds}")
    return Manifest(path, kubernetes_version, documents, containers)
