"""The deployment given with --triton-deployment: its documents read, validated against one
Kubernetes version, and its Triton containers found; any problem is one DeploymentError line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .kserve import kserve_containers
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


def read_manifest(path: Path, kubernetes_version: str) -> Manifest:
    """The deployment at `path`, valid for `kubernetes_version`, with at least one Triton container:
    a workload's, or an InferenceService's merged with its runtime (kserve.py)."""
    documents = read_documents(path)
    validate(documents, kubernetes_version)
    containers = triton_containers(documents) + kserve_containers(documents)
    if not containers:
        kinds = ", ".join(sorted({d.kind or "no kind" for d in documents}))
        raise DeploymentError(f"{path}: no Triton container (command, args or image naming tritonserver) in any "
                              f"Deployment, StatefulSet, DaemonSet, Pod or InferenceService; the documents are: {kinds}")
    return Manifest(path, kubernetes_version, documents, containers)
