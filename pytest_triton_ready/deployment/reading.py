"""Reading rendered manifests (helm template / kustomize build output): the documents and the
Triton container of each workload, found by its command/args (tritonserver) or image."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import TritonReadyError

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Pod")


class DeploymentError(TritonReadyError, ValueError):
    """A deployment file that cannot be read or is not valid: a usage error."""


@dataclass(frozen=True)
class Document:
    path: Path
    index: int
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", ""))


@dataclass(frozen=True)
class TritonContainer:
    """One Triton container, with where it was read and the pod spec around it: the one view every
    rule reads. A Kubernetes workload's container is read as it is; a KServe InferenceService is
    normalized into the same shape (kserve.py), and so is a compose service (compose.py), with
    `fields` naming, per normalized field, where the source holds it, `absent`, per normalized
    field, why the source has no equivalent (or what it lacks and why; its rules are then NOT
    APPLICABLE, saying so), and `words`, the source's own wording of a rule's message or fix where
    Kubernetes' names fields the source does not have (judgement.worded)."""

    document: Document
    pod_spec: dict[str, Any]
    container: dict[str, Any]
    field_prefix: str
    args: list[str] = field(default_factory=list)
    source: str = "Kubernetes"  # whose defaults apply: Kubernetes, KServe, Compose
    fields: dict[str, str] = field(default_factory=dict)  # normalized field -> the source's field
    absent: dict[str, str | tuple[str, str]] = field(default_factory=dict)  # normalized field -> why none
    words: dict[str, str] = field(default_factory=dict)  # "rule", "rule:case" -> the source's wording
    workload: dict[str, Any] | None = None  # the workload as a Deployment would say it (replicas, labels)
    defaults: dict[str, Any] = field(default_factory=dict)  # the source's defaults (terminationGracePeriodSeconds)

    @property
    def workload_body(self) -> dict[str, Any]:
        """The workload the replicas, labels and strategy are read from."""
        return self.workload if self.workload is not None else self.document.body

    @property
    def workload_kind(self) -> str:
        return str(self.workload_body.get("kind", ""))


def read_documents(path: Path) -> list[Document]:
    """Every YAML document of a file, or of each *.yaml/*.yml file of a folder (sorted)."""
    files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml")) if path.is_dir() else [path]
    if not files:
        raise DeploymentError(f"{path}: no manifests (*.yaml) found")
    documents = []
    for file in files:
        try:
            bodies = list(yaml.safe_load_all(file.read_text()))
        except (OSError, yaml.YAMLError) as error:
            raise DeploymentError(f"{file}: cannot read: {error}".splitlines()[0]) from None
        documents += [Document(file, index, body) for index, body in enumerate(bodies) if isinstance(body, dict)]
    return documents


def _pod_spec(document: Document) -> tuple[dict[str, Any], str] | None:
    body = document.body
    if document.kind == "Pod":
        return body.get("spec") or {}, "spec"
    if document.kind in WORKLOAD_KINDS:
        return ((body.get("spec") or {}).get("template") or {}).get("spec") or {}, "spec.template.spec"
    return None


def command_line(container: dict[str, Any]) -> list[str]:
    """The container's command followed by its args, as words."""
    return [str(word) for word in (container.get("command") or []) + (container.get("args") or [])]


_RUNS_TRITON = re.compile(r"(?:^|[\s;&|(/])tritonserver(?=$|[\s;&|)])")


def is_triton(container: dict[str, Any]) -> bool:
    """Whether the container runs tritonserver: a word of its command line runs it (not a host
    name such as tritonserver:8001), or its image is a Triton server image (not the client SDK's,
    tagged *-sdk)."""
    image = str(container.get("image", ""))
    server_image = "tritonserver" in image and not image.rsplit(":", 1)[-1].endswith("-sdk")
    return any(_RUNS_TRITON.search(word) for word in command_line(container)) or server_image


def triton_containers(documents: list[Document]) -> list[TritonContainer]:
    """The Triton containers of every workload document."""
    found = []
    for document in documents:
        spec = _pod_spec(document)
        if spec is None:
            continue
        pod_spec, prefix = spec
        for number, container in enumerate(pod_spec.get("containers") or []):
            if is_triton(container):
                found.append(TritonContainer(document, pod_spec, container, f"{prefix}.containers[{number}]",
                                             command_line(container)))
    return found
