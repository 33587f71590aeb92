"""Resources: the memory limit above the measured peak with headroom, and far enough above it that
the soak's slope takes longer than the horizon to reach it; requests within limits; the CPU limit
against the CPU used at the measured capacity; a memory-backed /dev/shm for python backend models;
the nvidia.com/gpu limit against the GPUs the KIND_GPU instance groups reference."""

from __future__ import annotations

from collections.abc import Mapping

from ..thresholds import ThresholdValue
from .judgement import NOT_APPLICABLE, ContainerJudgement, Measured, dig, gib, judgement, quantity, worded
from .reading import TritonContainer

MIB = 2**20
ALL_GPUS = "all"  # a compose reservation of every GPU of the host (count: all, gpus: all)


def _resource(container: TritonContainer, kind: str, name: str) -> float | None:
    return quantity(dig(container.container, "resources", kind, name))


def memory_limit(container: TritonContainer, measured: Measured, limits: Mapping[str, ThresholdValue]) -> ContainerJudgement:
    """limits.memory >= measured peak RSS x (1 + deployment_memory_headroom)."""
    headroom = limits["deployment_memory_headroom"]
    limit = _resource(container, "limits", "memory")
    if limit is None:
        return judgement("memory-limit", False, container, "resources.limits.memory",
                         worded(container, "memory-limit:none", "no memory limit: the pod can take the node's memory, "
                                "and the scheduler cannot place it by what it needs"), threshold=headroom,
                         fix=_memory_fix(container, measured, headroom))
    if measured.peak_rss_bytes is None:
        return judgement("memory-limit", None, container, "resources.limits.memory",
                         f"limit {gib(limit)}, held against nothing: {measured.why_missing('peak_rss_bytes')}",
                         manifest_value=gib(limit), threshold=headroom)
    needed = measured.peak_rss_bytes * (1 + headroom.value)
    return judgement("memory-limit", limit >= needed, container, "resources.limits.memory",
                     f"limit {gib(limit)}; measured peak {gib(measured.peak_rss_bytes)} x (1 + {headroom.value:g}) "
                     f"= {gib(needed)} needed", manifest_value=gib(limit),
                     measured=round(measured.peak_rss_bytes / MIB, 1), measured_label="peak server RSS (MiB)",
                     threshold=headroom, fix=_memory_fix(container, measured, headroom))


def _memory_fix(container: TritonContainer, measured: Measured, headroom: ThresholdValue) -> str:
    if measured.peak_rss_bytes is None:
        return worded(container, "memory-limit:fix-unmeasured",
                      "resources.limits.memory (and requests.memory) from a measured peak: run PERF-3's soak")
    mib = int(measured.peak_rss_bytes * (1 + headroom.value) / MIB) + 1
    return worded(container, "memory-limit:fix", f"resources.limits.memory: {mib}Mi or more (and requests.memory the "
                  "same, for a Guaranteed pod), else the pod is OOM-killed at its peak", mib=mib)


def time_to_limit(container: TritonContainer, measured: Measured, limits: Mapping[str, ThresholdValue]) -> ContainerJudgement:
    """At the soak's fitted memory slope, the limit is reached no sooner than deployment_memory_horizon_h."""
    horizon = limits["deployment_memory_horizon_h"]
    limit = _resource(container, "limits", "memory")
    if limit is None:
        return judgement("memory-time-to-limit", None, container, "resources.limits.memory",
                         "no memory limit to reach: the time to an OOM kill cannot be stated", threshold=horizon)
    if measured.peak_rss_bytes is None or measured.memory_slope_mb_h is None:
        missing = "peak_rss_bytes" if measured.peak_rss_bytes is None else "memory_slope_mb_h"
        return judgement("memory-time-to-limit", None, container, "resources.limits.memory",
                         f"limit {gib(limit)}: {measured.why_missing(missing)}", manifest_value=gib(limit),
                         threshold=horizon)
    slope = measured.memory_slope_mb_h
    room_mb = (limit - measured.peak_rss_bytes) / MIB  # the soak's MB/h are MiB per hour
    hours = float("inf") if slope <= 0 else max(room_mb, 0) / slope
    interval = (f" (at the interval's upper end {measured.memory_slope_high_mb_h:.1f} MB/h: "
                f"{max(room_mb, 0) / measured.memory_slope_high_mb_h:.1f} h)"
                if measured.memory_slope_high_mb_h and measured.memory_slope_high_mb_h > 0 else "")
    stated = "never (the slope is not positive)" if hours == float("inf") else f"in {hours:.1f} h"
    return judgement("memory-time-to-limit", hours >= horizon.value, container, "resources.limits.memory",
                     f"at {slope:.1f} MB/h from the peak {gib(measured.peak_rss_bytes)} the pod reaches its "
                     f"{gib(limit)} limit {stated}{interval}; the horizon is {horizon.value:g} h",
                     manifest_value=gib(limit), measured=round(slope, 2), measured_label="memory slope (MB/h)",
                     threshold=horizon, fix="find the leak (PERF-3's memory chart), or raise the limit to peak + "
                                            "slope x horizon, or restart the pods more often than the time stated")


def memory_request(container: TritonContainer) -> ContainerJudgement:
    """requests.memory <= limits.memory (a request above its limit is refused by the API server)."""
    request, limit = _resource(container, "requests", "memory"), _resource(container, "limits", "memory")
    good = request is None or limit is None or request <= limit
    shown = f"request {gib(request) if request else 'none'}, limit {gib(limit) if limit else 'none'}"
    return judgement("memory-request", good, container, "resources.requests.memory", shown,
                     manifest_value=gib(request) if request else None,
                     fix=worded(container, "memory-request:fix", "resources.requests.memory at most "
                                "resources.limits.memory"))


def cpu_limit(container: TritonContainer, measured: Measured, limits: Mapping[str, ThresholdValue]) -> ContainerJudgement:
    """limits.cpu >= the CPU the server used at PERF-2's capacity x (1 + deployment_cpu_headroom); the
    report's capacity holds only within such a limit."""
    headroom = limits["deployment_cpu_headroom"]
    limit = _resource(container, "limits", "cpu")
    if limit is None:
        return judgement("cpu-limit", True, container, "resources.limits.cpu",
                         "no CPU limit: nothing throttles the server below the capacity measured here (on a node "
                         "with the cores this run's server had)", threshold=headroom)
    if measured.cpu_cores_at_capacity is None:
        return judgement("cpu-limit", None, container, "resources.limits.cpu",
                         f"limit {limit:g} cores; the report's capacity holds only if the server used no more: "
                         f"{measured.why_missing('cpu_cores_at_capacity')}", manifest_value=limit, threshold=headroom)
    needed = measured.cpu_cores_at_capacity * (1 + headroom.value)
    where = (f"; the capacity was measured inside the deployment's limits ({measured.inside_limits})"
             if measured.inside_limits else "; the capacity was measured without this limit, on this run's host")
    return judgement("cpu-limit", limit >= needed, container, "resources.limits.cpu",
                     f"limit {limit:g} cores; {measured.cpu_cores_at_capacity:.2f} cores used by the server at "
                     f"PERF-2's capacity x "
                     f"(1 + {headroom.value:g}) = {needed:.2f} needed{where}", manifest_value=limit,
                     measured=measured.cpu_cores_at_capacity, measured_label="CPU cores at capacity",
                     threshold=headroom, fix=worded(container, "cpu-limit:fix", f"resources.limits.cpu: {needed:.1f} or "
                                                    "more, or state the capacity measured inside this limit",
                                                    cores=needed))


def shared_memory(container: TritonContainer, measured: Measured, limits: Mapping[str, ThresholdValue]) -> ContainerJudgement:
    """Python backend models get /dev/shm from a memory-backed emptyDir of at least
    deployment_shm_min_mib (a container's default /dev/shm is 64 MiB)."""
    minimum = limits["deployment_shm_min_mib"]
    if measured.python_models is None:
        return judgement("dev-shm", None, container, "volumeMounts",
                         f"which models use the python backend is not known: {measured.why_missing('python_models')}")
    if not measured.python_models:
        return judgement("dev-shm", NOT_APPLICABLE, container, "volumeMounts",
                         "no model in scope uses the python backend")
    mounts = container.container.get("volumeMounts") or []
    number, mount = next(((n, m) for n, m in enumerate(mounts) if m.get("mountPath") == "/dev/shm"), (None, None))
    models = ", ".join(measured.python_models)
    fix = worded(container, "dev-shm:fix", f"a volume `emptyDir: {{medium: Memory, sizeLimit: {minimum.value:g}Mi}}` "
                 "(or more) mounted at /dev/shm: the python backend's stubs exchange every tensor through it, and "
                 "without one the pod's /dev/shm is the runtime's 64 MiB default, which large requests overflow",
                 minimum=minimum.value)
    if mount is None:
        return judgement("dev-shm", False, container, worded(container, "dev-shm:field", "volumeMounts"),
                         worded(container, "dev-shm:none", f"python backend models ({models}) and no volume mounted "
                                "at /dev/shm", models=models), threshold=minimum, fix=fix)
    volumes = {v.get("name"): (n, v) for n, v in enumerate(container.pod_spec.get("volumes") or [])}
    index, volume = volumes.get(mount.get("name"), (None, {}))
    medium, size = dig(volume, "emptyDir", "medium"), quantity(dig(volume, "emptyDir", "sizeLimit"))
    good = medium == "Memory" and (size is None or size >= minimum.value * MIB)
    where = f"pod:volumes[{index}].emptyDir" if index is not None else f"volumeMounts[{number}]"
    return judgement("dev-shm", good, container, where,
                     f"/dev/shm is volume {mount.get('name')!r}: medium {medium or 'not Memory'}, sizeLimit "
                     f"{f'{size / MIB:g} MiB' if size else 'none'}; python backend models: {models}",
                     manifest_value={"medium": medium, "sizeLimit": dig(volume, "emptyDir", "sizeLimit")},
                     threshold=minimum, fix=fix)


def gpu_limit(container: TritonContainer, measured: Measured) -> ContainerJudgement:
    """limits nvidia.com/gpu >= the GPUs the KIND_GPU instance groups reference."""
    raw = dig(container.container, "resources", "limits", "nvidia.com/gpu")
    limit = raw if raw == ALL_GPUS else quantity(raw)
    if measured.gpus_needed is None:
        return judgement("gpu-limit", None, container, "resources.limits.nvidia.com/gpu",
                         f"the instance groups are not known: {measured.why_missing('gpus_needed')}",
                         manifest_value=limit)
    needed = max(measured.gpus_needed.values(), default=0)
    models = ", ".join(f"{m} ({n})" for m, n in sorted(measured.gpus_needed.items())) or "none"
    gpus = None if limit is None else limit if limit == ALL_GPUS else f"{limit:g}"
    shown = f"nvidia.com/gpu limit {gpus}" if gpus else "no nvidia.com/gpu limit"
    return judgement("gpu-limit", limit == ALL_GPUS or (limit or 0) >= needed, container,
                     "resources.limits.nvidia.com/gpu",
                     worded(container, "gpu-limit", f"{shown}; KIND_GPU models and the GPUs they reference: {models}",
                            gpus=gpus or "none", models=models),
                     manifest_value=limit, measured=needed, measured_label="GPUs the instance groups reference",
                     fix=worded(container, "gpu-limit:fix", f"resources.limits.nvidia.com/gpu: {needed}: without it the "
                                "pod sees no GPU and KIND_GPU models fail to load", needed=needed))


def judge_resources(container: TritonContainer, measured: Measured,
                    limits: Mapping[str, ThresholdValue]) -> dict[str, list[ContainerJudgement]]:
    """The rules by the check that records them: memory, cpu, models (shm and GPUs)."""
    return {"memory": [memory_limit(container, measured, limits), time_to_limit(container, measured, limits),
                       memory_request(container)],
            "cpu": [cpu_limit(container, measured, limits)],
            "models": [shared_memory(container, measured, limits), gpu_limit(container, measured)]}
