"""KServe: an InferenceService whose predictor runs on Triton (`spec.predictor.triton`, or
`spec.predictor.model` naming a runtime, or a model format that a runtime of the manifests
auto-selects), normalized into the one container view the rules read. The container is the
ServingRuntime's (or ClusterServingRuntime's) merged with the predictor's overrides as KServe merges
them (a strategic merge: resources per key, env by name, volumeMounts by mountPath, the predictor's
args appended to the runtime's, any other field replaced); runtimeVersion replaces the image's tag
(not a digest); a storageUri is the storage initializer's volume at /mnt/models, read-only unless
`storage.kserve.io/readonly: "false"`. In the Serverless (Knative) mode, KServe's default, Knative
makes the revision's timeoutSeconds (spec.predictor.timeout, default 300 s) the grace period."""

from __future__ import annotations

import copy
from typing import Any

from .judgement import dig
from .reading import DeploymentError, Document, TritonContainer, command_line, is_triton

RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
KNATIVE_DEFAULT_TIMEOUT_S = 300  # Knative's revision timeoutSeconds, which it makes the grace period
RUNTIME_POD_KEYS = ("nodeSelector", "affinity", "tolerations", "volumes", "imagePullSecrets", "schedulerName")
PREDICTOR_POD_KEYS = ("terminationGracePeriodSeconds", "volumes", "securityContext", "nodeSelector", "tolerations",
                      "affinity", "serviceAccountName", "imagePullSecrets", "schedulerName")
NOT_CONTAINER_KEYS = ("storageUri", "runtimeVersion", "modelFormat", "runtime", "protocolVersion", "storage")
LIST_MERGE_KEYS = {"env": "name", "volumeMounts": "mountPath", "ports": "containerPort"}
STORAGE_VOLUME, STORAGE_MOUNT = "kserve-provision-location", "/mnt/models"
CONTAINER_FIELDS = ("resources.limits.memory", "resources.limits.cpu", "resources.requests.memory",
                    "resources.limits.nvidia.com/gpu", "livenessProbe", "readinessProbe", "startupProbe",
                    "lifecycle", "securityContext", "image")
STRATEGY_ABSENT = ("KServe rolls a predictor out as a new revision beside the old one (Serverless) or through a "
                   "Deployment it renders itself (RawDeployment): the capacity left during a rollout is not read "
                   "from the InferenceService")


def _name(document: Document) -> str:
    return str(dig(document.body, "metadata", "name") or "")


def _component(predictor: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(the predictor's component key, its spec): `triton`, which KServe turns into a model of
    format triton, or `model`."""
    for key in ("triton", "model"):
        if isinstance(predictor.get(key), dict):
            return key, predictor[key]
    return None


def _model_format(key: str, component: dict[str, Any]) -> str | None:
    return "triton" if key == "triton" else dig(component, "modelFormat", "name")


def _in_scope(document: Document, namespace: str | None) -> bool:
    return document.kind == "ClusterServingRuntime" or dig(document.body, "metadata", "namespace") in (None, namespace)


def _named_runtime(documents: list[Document], name: str, namespace: str | None) -> Document | None:
    """The ServingRuntime of the InferenceService's namespace, else the ClusterServingRuntime, named `name`."""
    for kind in RUNTIME_KINDS:
        for document in documents:
            if document.kind == kind and _name(document) == name and _in_scope(document, namespace):
                return document
    return None


def _priority(runtime: Document, model_format: str) -> int | None:
    """The priority with which `runtime` auto-selects `model_format`; None where it does not."""
    for entry in dig(runtime.body, "spec", "supportedModelFormats") or []:
        if isinstance(entry, dict) and entry.get("name") == model_format and entry.get("autoSelect"):
            return int(entry.get("priority") or 0)
    return None


def _auto_selected(documents: list[Document], model_format: str, namespace: str | None) -> Document | None:
    """The runtime KServe selects for a model format: a ServingRuntime of the namespace before a
    ClusterServingRuntime, the highest priority first, among those that auto-select the format."""
    for kind in RUNTIME_KINDS:
        ranked = [(_priority(d, model_format), n, d) for n, d in enumerate(documents)
                  if d.kind == kind and _in_scope(d, namespace) and not dig(d.body, "spec", "disabled")]
        ranked = [(p, n, d) for p, n, d in ranked if p is not None]
        if ranked:
            return max(ranked, key=lambda item: (item[0], -item[1]))[2]
    return None


def _runtime(documents: list[Document], component: dict[str, Any], model_format: str | None,
             namespace: str | None) -> Document | None:
    if component.get("runtime"):
        return _named_runtime(documents, str(component["runtime"]), namespace)
    return _auto_selected(documents, model_format, namespace) if model_format else None


def _missing_runtime(where: str, key: str, component: dict[str, Any], model_format: str | None) -> DeploymentError:
    wanted = (f"its runtime {component['runtime']} is not in the manifests" if component.get("runtime")
              else f"no runtime in the manifests auto-selects model format {model_format}")
    return DeploymentError(f"{where}: field spec.predictor.{key}: {wanted}: render the ServingRuntime or "
                           "ClusterServingRuntime with the rest (KServe's config/runtimes/kserve-tritonserver.yaml)")


def _merge_list(runtime: list[dict], override: list[dict], key: str) -> list[dict]:
    merged = {item.get(key): copy.deepcopy(item) for item in runtime}
    for item in override:
        merged[item.get(key)] = {**merged.get(item.get(key), {}), **copy.deepcopy(item)}
    return list(merged.values())


def _merge_resources(runtime: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    parts = {**runtime, **override}
    return {part: {**(runtime.get(part) or {}), **(override.get(part) or {})} for part in parts}


def _merge(runtime: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """The runtime's container with the predictor's overrides, as KServe's MergeRuntimeContainers."""
    merged = copy.deepcopy(runtime)
    for key, value in override.items():
        if key in NOT_CONTAINER_KEYS:
            continue
        if key == "args":
            merged["args"] = [*(runtime.get("args") or []), *value]
        elif key == "resources":
            merged["resources"] = _merge_resources(runtime.get("resources") or {}, value or {})
        elif key in LIST_MERGE_KEYS:
            merged[key] = _merge_list(runtime.get(key) or [], value or [], LIST_MERGE_KEYS[key])
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _pod(runtime: Document, predictor: dict[str, Any]) -> dict[str, Any]:
    """The pod spec: the runtime's pod fields under the predictor's (volumes merged by name)."""
    spec = runtime.body.get("spec") or {}
    pod = {k: copy.deepcopy(spec[k]) for k in RUNTIME_POD_KEYS if k in spec}
    for key in PREDICTOR_POD_KEYS:
        if key == "volumes" and key in predictor:
            pod["volumes"] = _merge_list(pod.get("volumes") or [], predictor["volumes"] or [], "name")
        elif key in predictor:
            pod[key] = copy.deepcopy(predictor[key])
    return pod


def _with_version(image: str, version: str | None) -> str:
    """The image with runtimeVersion as its tag; a digest is left as it is (KServe's UpdateImageTag)."""
    if not version or "@sha256:" in image:
        return image
    name, _, tag = image.rpartition(":")
    return f"{name}:{version}" if name and "/" not in tag else f"{image}:{version}"


def _origin(key: str, override: dict[str, Any], base: str, runtime_field: str, runtime_container: dict) -> str:
    """Where the merged container's field `key` is written: the predictor's, else the runtime's."""
    parts = key.split(".", 2) if key.startswith("resources.") else [key]
    if dig(override, *parts) is not None or (key == "image" and override.get("runtimeVersion")):
        return f"{base}.{'runtimeVersion' if key == 'image' else key}"
    return f"{runtime_field}.{key}" if dig(runtime_container, *parts) is not None else f"{base}.{key}"


def _argument_fields(runtime_args: list[Any], override_args: list[Any], base: str, runtime_field: str) -> dict:
    """Each merged argument's field: the runtime's args first, the predictor's appended."""
    fields = {f"args[{n}]": f"{runtime_field}.args[{n}]" for n in range(len(runtime_args))}
    fields.update({f"args[{len(runtime_args) + n}]": f"{base}.args[{n}]" for n in range(len(override_args))})
    fields["args"] = f"{base}.args (after {runtime_field}.args)" if override_args else f"{runtime_field}.args"
    return fields


def _storage(container: dict[str, Any], pod: dict[str, Any], component: dict, isvc: Document, base: str,
             fields: dict[str, str]) -> None:
    """The storage initializer's volume and mount for a storageUri (KServe injects them)."""
    if not component.get("storageUri"):
        return
    read_only = dig(isvc.body, "metadata", "annotations", "storage.kserve.io/readonly") != "false"
    mounts = container.setdefault("volumeMounts", [])
    fields[f"volumeMounts[{len(mounts)}]"] = f"{base}.storageUri"
    fields[f"volumeMounts[{len(mounts)}].readOnly"] = "metadata.annotations.storage.kserve.io/readonly"
    mounts.append({"name": STORAGE_VOLUME, "mountPath": STORAGE_MOUNT, "readOnly": read_only})
    pod.setdefault("volumes", []).append({"name": STORAGE_VOLUME, "emptyDir": {}})


def serverless(isvc: Document) -> bool:
    """Whether KServe runs the InferenceService on Knative: its default, unless the deploymentMode
    annotation says RawDeployment (Standard)."""
    mode = dig(isvc.body, "metadata", "annotations", "serving.kserve.io/deploymentMode")
    return mode not in ("RawDeployment", "Standard")


def _grace_defaults(isvc: Document, predictor: dict[str, Any], pod: dict[str, Any], fields: dict[str, str]) -> dict:
    """In the Serverless mode Knative sets the grace period to the revision's timeout; in the
    RawDeployment mode it is the pod's, Kubernetes' default where the predictor leaves it out."""
    if not serverless(isvc):
        return {"grace_source": "Kubernetes' default: KServe's RawDeployment mode renders a Deployment"}
    pod.pop("terminationGracePeriodSeconds", None)
    fields["pod:terminationGracePeriodSeconds"] = "spec.predictor.timeout"
    timeout = predictor.get("timeout")
    return {"terminationGracePeriodSeconds": float(timeout or KNATIVE_DEFAULT_TIMEOUT_S),
            "grace_source": "Knative's revision timeoutSeconds in KServe's Serverless mode: "
                            + ("spec.predictor.timeout" if timeout else "its default")}


def _workload(isvc: Document, predictor: dict[str, Any]) -> dict[str, Any]:
    """The InferenceService as a Deployment would say it: minReplicas and the predictor pods' labels."""
    labels = {"serving.kserve.io/inferenceservice": _name(isvc), "component": "predictor",
              **(dig(predictor, "labels") or {})}
    return {"kind": "InferenceService", "metadata": isvc.body.get("metadata") or {},
            "spec": {"replicas": predictor.get("minReplicas", 1), "template": {"metadata": {"labels": labels}}}}


def _runtime_container(runtime: Document) -> tuple[int, dict[str, Any]] | None:
    containers = dig(runtime.body, "spec", "containers") or []
    return next(((n, c) for n, c in enumerate(containers) if isinstance(c, dict) and is_triton(c)), None)


def inference_service_container(isvc: Document, documents: list[Document]) -> TritonContainer | None:
    """The Triton container of one InferenceService, normalized; None where its predictor is not Triton."""
    predictor = dig(isvc.body, "spec", "predictor") or {}
    found = _component(predictor)
    if found is None:
        return None
    key, component = found
    model_format = _model_format(key, component)
    where = f"{isvc.path} document {isvc.index} (InferenceService {_name(isvc)})"
    runtime = _runtime(documents, component, model_format, dig(isvc.body, "metadata", "namespace"))
    if runtime is None:
        if model_format == "triton":
            raise _missing_runtime(where, key, component, model_format)
        return None
    triton = _runtime_container(runtime)
    if triton is None:
        return None
    number, runtime_container = triton
    runtime_field = f"{runtime.kind} {_name(runtime)} ({runtime.path} document {runtime.index}) spec.containers[{number}]"
    base = f"spec.predictor.{key}"
    container = _merge(runtime_container, component)
    container["image"] = _with_version(str(container.get("image", "")), component.get("runtimeVersion"))
    pod = _pod(runtime, predictor)
    fields = {k: _origin(k, component, base, runtime_field, runtime_container) for k in CONTAINER_FIELDS}
    fields.update(_argument_fields(runtime_container.get("args") or [], component.get("args") or [], base,
                                   runtime_field))
    fields.update({f"pod:{k}": f"spec.predictor.{k}" for k in PREDICTOR_POD_KEYS})
    fields["/spec.replicas"] = "spec.predictor.minReplicas"
    fields["/spec.strategy"] = "spec.predictor"
    _storage(container, pod, component, isvc, base, fields)
    defaults = _grace_defaults(isvc, predictor, pod, fields)
    return TritonContainer(isvc, pod, container, base, command_line(container), source="KServe", fields=fields,
                           absent={"/spec.strategy": STRATEGY_ABSENT}, workload=_workload(isvc, predictor),
                           defaults=defaults)


def kserve_containers(documents: list[Document]) -> list[TritonContainer]:
    """The Triton containers of every InferenceService among the documents."""
    found = [inference_service_container(d, documents) for d in documents if d.kind == "InferenceService"]
    return [container for container in found if container is not None]
