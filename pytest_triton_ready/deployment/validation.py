"""Validating Kubernetes objects against the official schemas of one Kubernetes version, offline."""

from __future__ import annotations

import kubernetes_validate

from .reading import DeploymentError, Document

DEFAULT_KUBERNETES_VERSION = "1.30.0"


def validate(documents: list[Document], version: str = DEFAULT_KUBERNETES_VERSION) -> None:
    """DeploymentError naming file, document index and field of the first invalid object."""
    for document in documents:
        try:
            kubernetes_validate.validate(document.body, version, strict=True)
        except kubernetes_validate.utils.ValidationError as error:
            where = ".".join(str(part) for part in error.path) or "(top level)"
            raise DeploymentError(f"{document.path} document {document.index} ({document.kind}): "
                                  f"field {where}: {error.message} (Kubernetes {version} schema)") from None
        except kubernetes_validate.utils.SchemaNotFoundError:
            continue  # a custom resource (InferenceService, IngressRoute): no official schema
