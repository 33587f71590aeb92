"""Scaling and posture: every HorizontalPodAutoscaler metric of the workload is one the server
exports (or a metrics-adapter rule in the manifests derives from one); at least two replicas with a
PodDisruptionBudget, so a node drain or a rollout never takes the last one, and the replicas left
serving during a rolling update carry the declared peak; the image is pinned (a tag
other than latest, or a digest); the container cannot run as root; the model repository is
mounted read-only."""

from __future__ import annotations

from typing import Any

import yaml

from .judgement import (
    FAIL,
    INCOMPLETE,
    NOT_APPLICABLE,
    PASS,
    ContainerJudgement,
    Measured,
    dig,
    flag_value,
    judgement,
    quantity,
    worded,
)
from .manifest import Manifest
from .reading import Document, TritonContainer

RESOURCE_METRICS = ("Resource", "ContainerResource")  # cpu and memory, from the kubelet, not the server
AUTOSCALER = "/HorizontalPodAutoscaler"  # the `absent` key of a source that has none


def adapter_names(manifest: Manifest) -> dict[str, str]:
    """Adapter metric name -> the series it is read from, from the prometheus-adapter rules of any
    ConfigMap in the manifests (`rules:` entries with seriesQuery and name.as)."""
    names: dict[str, str] = {}
    for document in manifest.of_kind("ConfigMap"):
        for text in (document.body.get("data") or {}).values():
            try:
                config = yaml.safe_load(text)
            except yaml.YAMLError:
                continue
            rules = config.get("rules") if isinstance(config, dict) else None
            for rule in (rules.get("custom", []) if isinstance(rules, dict) else rules or []):
                if isinstance(rule, dict) and dig(rule, "name", "as"):
                    series = str(rule.get("seriesQuery", "")).split("{")[0].strip(" '\"")
                    names[str(rule["name"]["as"])] = series
    return names


def _scales(hpa: Document, container: TritonContainer) -> bool:
    target = dig(hpa.body, "spec", "scaleTargetRef") or {}
    workload = container.workload_body
    return target.get("kind") == workload.get("kind") and target.get("name") == dig(workload, "metadata", "name")


def _autoscalers(manifest: Manifest, container: TritonContainer) -> list[Document]:
    """The HorizontalPodAutoscalers that scale the container's workload."""
    return [h for h in manifest.of_kind("HorizontalPodAutoscaler") if _scales(h, container)]


def _metric_name(metric: dict[str, Any]) -> str | None:
    kind = metric.get("type", "")
    return dig(metric, kind[:1].lower() + kind[1:], "metric", "name")


def hpa_metrics(manifest: Manifest, container: TritonContainer, measured: Measured) -> list[ContainerJudgement]:
    """One judgement per autoscaler of the workload: each of its metrics exported by the server; NOT
    APPLICABLE, saying why, where the source has no autoscaler (compose)."""
    if AUTOSCALER in container.absent:
        return [judgement("hpa-metrics", NOT_APPLICABLE, container, AUTOSCALER, "")]
    judgements = []
    adapter = adapter_names(manifest)
    for hpa in _autoscalers(manifest, container):
        where = f"{hpa.path} document {hpa.index}"
        names = [(n, _metric_name(m)) for n, m in enumerate(dig(hpa.body, "spec", "metrics") or [])
                 if m.get("type") not in RESOURCE_METRICS]
        if measured.exported_metrics is None:
            judgements.append(ContainerJudgement("hpa-metrics", INCOMPLETE, f"the autoscaler scales on "
                                        f"{[n for _, n in names]}: {measured.why_missing('exported_metrics')}",
                                        where, "spec.metrics"))
            continue
        unknown = [(n, name) for n, name in names
                   if name not in measured.exported_metrics and adapter.get(str(name)) not in measured.exported_metrics]
        shown = ", ".join(f"{name} (from {adapter[name]})" if name in adapter else str(name) for _, name in names)
        fields = ", ".join(f"spec.metrics[{n}]" for n, _ in unknown) or "spec.metrics"
        message = (f"the autoscaler scales on {shown or 'resource metrics only'}; "
                   + (f"not exported by this server: {', '.join(str(name) for _, name in unknown)}" if unknown else
                      "every one is exported by this server"))
        judgements.append(ContainerJudgement(
            "hpa-metrics", FAIL if unknown else PASS, message, where, fields,
            manifest_value=[name for _, name in names], measured=len(measured.exported_metrics),
            measured_label="metric names the server exports",
            fix=None if not unknown else "scale on a metric the server exports (nv_inference_queue_duration_us, "
                                         "nv_inference_pending_request_count) or add the metrics-adapter rule "
                                         "that derives the name from one, in the manifests: an autoscaler on a "
                                         "metric that does not exist never scales"))
    return judgements


_TIME_UNITS_MS = {"_us": 1e-3, "_ms": 1.0, "_seconds": 1e3}


def hpa_targets(manifest: Manifest, container: TritonContainer, budget_ms: float | None,
                budget_source: str) -> list[ContainerJudgement]:
    """Each latency metric an autoscaler of the workload scales on (a name, or the series its
    adapter rule reads, ending in _us, _ms or _seconds) targets less than the SLO's p99 budget:
    an autoscaler whose target is at or above the budget adds pods only after the SLO is broken."""
    adapter = adapter_names(manifest)
    judgements = []
    for hpa in _autoscalers(manifest, container):
        for number, metric in enumerate(dig(hpa.body, "spec", "metrics") or []):
            name = _metric_name(metric)
            if metric.get("type") in RESOURCE_METRICS or name is None:
                continue
            series = adapter.get(name, name)
            scale = next((f for word in (name, series) for suffix, f in _TIME_UNITS_MS.items()
                          if word.endswith(suffix)), None)  # the unit the HPA sees first, else its series'

            target = dig(metric, str(metric.get("type", "")).lower(), "target") or {}
            value = quantity(target.get("averageValue", target.get("value")))
            if scale is None or value is None:
                continue
            field = f"spec.metrics[{number}].{str(metric['type']).lower()}.target"
            where = f"{hpa.path} document {hpa.index}"
            target_ms = value * scale
            shown = f"{name} (from {series})" if series != name else name
            if budget_ms is None:
                judgements.append(ContainerJudgement("hpa-target", INCOMPLETE, f"the autoscaler targets {shown} at "
                                            f"{target_ms:g} ms, held against no p99 budget: no SLO declared "
                                            "(--triton-slo-p99-ms or slo: per model)", where, field))
                continue
            good = target_ms < budget_ms
            judgements.append(ContainerJudgement(
                "hpa-target", PASS if good else FAIL,
                f"the autoscaler targets {shown} at {target_ms:g} ms; the p99 budget is {budget_ms:g} ms "
                f"({budget_source})" + ("" if good else ": pods are added only once requests already miss it"),
                where, field, manifest_value=target.get("averageValue", target.get("value")), measured=budget_ms,
                measured_label="p99 budget (ms)",
                fix=None if good else f"{field}: well below {budget_ms:g} ms (e.g. a quarter of it), so that new "
                                      "pods are ready before the budget is spent"))
    return judgements


def _selects(budget: Document, container: TritonContainer) -> bool:
    wanted = dig(budget.body, "spec", "selector", "matchLabels") or {}
    labels = dig(container.workload_body, "spec", "template", "metadata", "labels") or {}
    return bool(wanted) and all(labels.get(key) == value for key, value in wanted.items())


def replicas_and_disruption_budget(manifest: Manifest, container: TritonContainer) -> ContainerJudgement:
    """At least two replicas (spec.replicas, or the autoscaler's minReplicas) and a
    PodDisruptionBudget that selects the pods: one replica is an outage at every drain and restart."""
    floors = _autoscalers(manifest, container)
    least = _least_replicas(manifest, container)
    budgets = [d for d in manifest.of_kind("PodDisruptionBudget") if _selects(d, container)]
    source = "the autoscaler's minReplicas" if floors else "spec.replicas"
    message = (f"{least} replica(s) at least ({source}); "
               + (f"PodDisruptionBudget {dig(budgets[0].body, 'metadata', 'name')!r} selects the pods" if budgets
                  else "no PodDisruptionBudget selects the pods"))
    return judgement("replicas-and-disruption-budget", least >= 2 and bool(budgets), container, "/spec.replicas",
                     message, manifest_value=least,
                     fix="replicas: 2 or more (minReplicas: 2 on the autoscaler) and a PodDisruptionBudget with "
                         "maxUnavailable: 1 selecting the pods: a drain, a rollout or a restart then never takes "
                         "the last replica while its models load")


def _least_replicas(manifest: Manifest, container: TritonContainer) -> int:
    replicas = 1 if container.workload_kind == "Pod" else int(dig(container.workload_body, "spec", "replicas") or 1)
    floors = [int(dig(h.body, "spec", "minReplicas") or 1) for h in _autoscalers(manifest, container)]
    return max(floors) if floors else replicas


def _unavailable(value: Any, replicas: int) -> int:
    """maxUnavailable as pods: a percentage rounds down, as Kubernetes does (default 25%)."""
    text = str(value if value is not None else "25%")
    return int(replicas * float(text[:-1]) / 100) if text.endswith("%") else int(text)


def rollout_capacity(manifest: Manifest, container: TritonContainer, measured: Measured) -> ContainerJudgement:
    """During a rolling update (replicas - maxUnavailable) x one replica's capacity (PERF-2) carries
    the declared peak with headroom (OPS-2) for every model; a Recreate strategy serves nothing."""
    least = _least_replicas(manifest, container)
    strategy = dig(container.workload_body, "spec", "strategy") or {}
    recreate = strategy.get("type") == "Recreate" or container.workload_kind != "Deployment"
    down = least if recreate else _unavailable(dig(strategy, "rollingUpdate", "maxUnavailable"), least)
    serving = max(least - down, 0)
    shown = (f"{least} replica(s), {'Recreate: none' if recreate else f'maxUnavailable {down}: {serving}'} "
             "serving during a rollout")
    if measured.replica_capacity is None or measured.required_at_peak is None:
        missing = "replica_capacity" if measured.replica_capacity is None else "required_at_peak"
        return judgement("rollout-capacity", None, container, "/spec.strategy",
                         f"{shown}: {measured.why_missing(missing)}", manifest_value=serving)
    short = {m: (serving * measured.replica_capacity.get(m, 0.0), need)
             for m, need in measured.required_at_peak.items()
             if serving * measured.replica_capacity.get(m, 0.0) < need}
    carried = ", ".join(f"{m} {serving} x {measured.replica_capacity.get(m, 0.0):.0f} infer/s against "
                        f"{need:.0f} needed" for m, need in sorted(measured.required_at_peak.items()))
    return judgement("rollout-capacity", not short, container, "/spec.strategy", f"{shown}; {carried}",
                     manifest_value=serving, measured=min(measured.replica_capacity.values()),
                     measured_label="capacity of one replica within SLO (infer/s, lowest model)",
                     fix="more replicas (minReplicas) or a rolling update with maxUnavailable: 0 and maxSurge: 1, so "
                         "that the pods left serving during a rollout carry the declared peak")


def image_pinned(container: TritonContainer) -> ContainerJudgement:
    """The image names a digest, or a tag other than latest; a service built from a Dockerfile with no
    image named is NOT APPLICABLE (what is pinned is its FROM line)."""
    built = worded(container, "image-pinned:built", "")
    if built:
        return judgement("image-pinned", NOT_APPLICABLE, container, "image", built)
    image = str(container.container.get("image", ""))
    name = image.rsplit("/", 1)[-1]
    tag = name.split(":", 1)[1] if ":" in name else None
    good = "@sha256:" in image or (tag is not None and tag != "latest")
    return judgement("image-pinned", good, container, "image", f"image {image}", manifest_value=image,
                     fix="pin the image by a release tag (nvcr.io/nvidia/tritonserver:26.07-py3) or a digest "
                         "(@sha256:...): latest changes under a running deployment")


def run_as_non_root(container: TritonContainer) -> ContainerJudgement:
    """runAsNonRoot: true, or a runAsUser other than 0, on the container or the pod."""
    own, pod = container.container.get("securityContext") or {}, container.pod_spec.get("securityContext") or {}
    non_root = own.get("runAsNonRoot", pod.get("runAsNonRoot"))
    user = own.get("runAsUser", pod.get("runAsUser"))
    good = non_root is True or (user is not None and user != 0 and non_root is not False)
    path = "securityContext" if own else "pod:securityContext"
    return judgement("run-as-non-root", good, container, path,
                     worded(container, "run-as-non-root", f"runAsNonRoot {non_root if non_root is not None else 'not set'}"
                                                          f", runAsUser {user if user is not None else 'not set'}"),
                     manifest_value={"runAsNonRoot": non_root, "runAsUser": user},
                     fix=worded(container, "run-as-non-root:fix", "securityContext: {runAsNonRoot: true, runAsUser: "
                                                                  "1000}: a process that breaks out of Triton should not "
                                                                  "be root"))


def repository_read_only(container: TritonContainer) -> ContainerJudgement:
    """The volume holding --model-repository is mounted read-only (a local path; a cloud URI is not
    a mount)."""
    repository = flag_value(container.args, "--model-repository") or flag_value(container.args, "--model-store")
    if repository is None or "://" in repository:
        return judgement("model-repository-read-only", NOT_APPLICABLE, container, "args",
                         f"the model repository is {repository or 'not given'}: not a mounted volume")
    mounts = container.container.get("volumeMounts") or []
    found = [(n, m) for n, m in enumerate(mounts)
             if repository.rstrip("/") == m.get("mountPath", "").rstrip("/")
             or repository.startswith(m.get("mountPath", "").rstrip("/") + "/")]
    if not found:
        return judgement("model-repository-read-only", False, container, "volumeMounts",
                         f"--model-repository={repository} is on no volume: inside the image, written by nobody",
                         fix=worded(container, "model-repository-read-only:fix-none",
                                    "mount the model repository from a volume, readOnly: true"))
    number, mount = max(found, key=lambda item: len(item[1].get("mountPath", "")))
    return judgement("model-repository-read-only", mount.get("readOnly") is True, container,
                     f"volumeMounts[{number}].readOnly",
                     f"--model-repository={repository} is volume {mount.get('name')!r} at {mount.get('mountPath')}, "
                     f"readOnly {mount.get('readOnly', 'not set')}", manifest_value=mount.get("readOnly"),
                     fix=worded(container, "model-repository-read-only:fix", f"volumeMounts[{number}].readOnly: "
                                "true: the server only reads its repository, and a writable one lets a compromised pod "
                                "change the models every replica loads", number=number))


def judge_posture(container: TritonContainer) -> list[ContainerJudgement]:
    return [image_pinned(container), run_as_non_root(container), repository_read_only(container)]
