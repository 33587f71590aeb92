"""Validating Kubernetes objects against the official schemas of one Kubernetes version, offline
(kubernetes-validate). A built-in API that version does not serve (autoscaling/v2beta2 after 1.25)
is refused like an invalid field; a custom resource (InferenceService, IngressRoute) has no
official schema and is left to the rules that read it."""

from __future__ import annotations

import kubernetes_validate
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError, all_versions

from . import DEFAULT_KUBERNETES_VERSION
from .reading import DeploymentError, Document


def built_in(api_version: str) -> bool:
    """Whether an apiVersion belongs to Kubernetes itself: the core group, a group without a dot
    (apps, autoscaling, batch, policy) or one under k8s.io."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


def validate(documents: list[Document], version: str = DEFAULT_KUBERNETES_VERSION) -> None:
    """DeploymentError naming file, document index and field of the first invalid object."""
    if version not in all_versions():
        raise DeploymentError(f"Kubernetes {version}: no schemas for it; known: "
                              f"{sorted(set(all_versions()))[0]} to {sorted(set(all_versions()))[-1]}")
    for document in documents:
        where = f"{document.path} document {document.index} ({document.kind or 'no kind'})"
        try:
            kubernetes_validate.validate(document.body, version, strict=True)
        except ValidationError as error:
            field = ".".join(str(part) for part in error.path) or "(top level)"
            raise DeploymentError(f"{where}: field {field}: {error.message} (Kubernetes {version} schema)") from None
        except SchemaNotFoundError:
            api_version = str(document.body.get("apiVersion", ""))
            if built_in(api_version):
                raise DeploymentError(f"{where}: field apiVersion: {api_version} {document.kind} is not served by "
                                      f"Kubernetes {version}") from None
