"""The container the settings ask for, as plain data: `container_spec(settings)` turns the settings
into the whole specification (image, command, GPUs, shared memory, ulimits, ports, the read-only
repository mount), so it is unit-tested without Docker; the container launcher hands it to
testcontainers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import LaunchError, serving_flags
from .embedded import DEMO_REPOSITORY
from .process import free_port
from .schema import DEFAULT_SHM_SIZE
from .ulimits import DEFAULT_ULIMITS, parse_ulimits

if TYPE_CHECKING:
    from ..deployment.pod_limits import PodLimits

CONTAINER_REPOSITORY = "/models"
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
# Triton's own advice for `docker run`: unlimited locked memory and a 64 MiB stack (the default of
# --triton-ulimits / container.ulimits).
ULIMITS = parse_ulimits(DEFAULT_ULIMITS)
_SHM_SIZE = re.compile(r"^[1-9][0-9]*[bkmg]?$", re.IGNORECASE)
_GPU_ID = re.compile(r"^([0-9]+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-zA-Z/-]+)$")


@dataclass(frozen=True)
class GpuRequest:
    """Which GPUs the container gets: every GPU (`all`), a list of indices or UUIDs, or none."""

    all: bool = False
    device_ids: tuple[str, ...] = ()

    @property
    def none(self) -> bool:
        return not self.all and not self.device_ids

    def describe(self) -> str:
        return "all" if self.all else (",".join(self.device_ids) or "none")


def parse_gpus(text: str | None, source: str = "default") -> GpuRequest:
    """`all` (the default), `none`, or a comma-separated list of GPU indices or UUIDs."""
    value = (text or "all").strip()
    if value.lower() == "all":
        return GpuRequest(all=True)
    if value.lower() == "none":
        return GpuRequest()
    ids = tuple(part.strip() for part in value.split(",") if part.strip())
    bad = [part for part in ids if not _GPU_ID.match(part)]
    if not ids or bad:
        raise LaunchError(f"--triton-gpus from {source}: expected all, none, or GPU indices/UUIDs like 0,1; "
                          f"got {value!r}")
    return GpuRequest(device_ids=ids)


@dataclass(frozen=True)
class ContainerSpec:
    """Everything Docker is asked for; `run_kwargs()` is what docker-py's `containers.create` takes
    beyond image, command, ports and volumes."""

    image: str
    command: tuple[str, ...]
    model_repository: Path
    gpus: GpuRequest
    shm_size: str
    host_ports: dict[int, int]
    bind_address: str = "127.0.0.1"
    environment: dict[str, str] = field(default_factory=dict)
    ulimits: dict[str, tuple[int, int]] = field(default_factory=lambda: dict(ULIMITS))
    ulimits_origin: str = "default"  # where --triton-ulimits came from, for the engine's refusal
    pod: PodLimits | None = None  # the deployment's limits the container runs inside (--triton-deployment)

    @property
    def ports(self) -> dict[str, tuple[str, int]]:
        """Container port -> (host address, host port), in docker-py's form."""
        return {f"{port}/tcp": (self.bind_address, host) for port, host in self.host_ports.items()}

    @property
    def volumes(self) -> dict[str, dict[str, str]]:
        """The model repository, mounted read-only where the server reads it."""
        return {str(self.model_repository): {"bind": CONTAINER_REPOSITORY, "mode": "ro"}}

    def device_requests(self) -> list[Any]:
        """docker-py DeviceRequests for the GPUs (what `docker run --gpus` sends); empty for none."""
        if self.gpus.none:
            return []
        from docker.types import DeviceRequest

        if self.gpus.all:
            return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        return [DeviceRequest(device_ids=list(self.gpus.device_ids), capabilities=[["gpu"]])]

    def run_kwargs(self) -> dict[str, Any]:
        from docker.types import Ulimit

        kwargs: dict[str, Any] = {"shm_size": self.shm_size}
        if self.pod is not None and self.pod.memory_bytes:  # no swap beyond it, as in a pod
            kwargs["mem_limit"] = kwargs["memswap_limit"] = self.pod.memory_bytes
        if self.pod is not None and self.pod.cpus:
            kwargs["nano_cpus"] = int(self.pod.cpus * 1e9)
        if self.ulimits:
            kwargs["ulimits"] = [Ulimit(name=name, soft=soft, hard=hard) for name, (soft, hard) in self.ulimits.items()]
        requests = self.device_requests()
        if requests:
            kwargs["device_requests"] = requests
        return kwargs


def server_command(exit_timeout_s: int = 30, extra_args: tuple[str, ...] | list[str] = (),
                   pod_flags: tuple[str, ...] = ()) -> tuple[str, ...]:
    """tritonserver's arguments inside the container: the same serving flags as the embedded
    launcher, on the image's default ports and all interfaces of the container, then the
    deployment's own flags (`pod_flags`), then `server.args` (`extra_args`) last, so that each
    wins over what comes before it. A deployment that sets another model control mode does not get
    --load-model=*, which only explicit mode takes."""
    from ..deployment.judgement import flag_value

    flags = serving_flags(exit_timeout_s)
    if flag_value(list(pod_flags), "--model-control-mode") not in (None, "explicit"):
        flags = [f for f in flags if not f.startswith("--load-model=")]
    return (
        "tritonserver",
        f"--model-repository={CONTAINER_REPOSITORY}",
        *flags,
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        f"--metrics-port={METRICS_PORT}",
        *pod_flags,
        *(str(arg) for arg in extra_args),
    )


def deployment_limits(settings) -> PodLimits | None:
    """The limits of --triton-deployment's Triton container, None without one; LaunchError naming
    the option where the deployment cannot be read."""
    path = getattr(settings, "triton_deployment", None)
    if path is None:
        return None
    from ..deployment.manifest import read_manifest
    from ..deployment.pod_limits import pod_limits
    from ..deployment.reading import DeploymentError

    try:
        return pod_limits(read_manifest(path, settings.triton_kubernetes_version))
    except (DeploymentError, ValueError) as exc:
        raise LaunchError(f"--triton-deployment from {getattr(settings, 'origins', {}).get('triton_deployment', 'settings')}: "
                          f"{exc}") from None


def container_spec(settings, host_ports: dict[int, int] | None = None, bind_address: str = "127.0.0.1",
                   exit_timeout_s: int = 30) -> ContainerSpec:
    """The container the settings ask for. Raises LaunchError (one line naming the setting and
    where it came from) for a missing image, a bad GPU list, shm size or repository."""
    sources = getattr(settings, "sources", {})
    image = (settings.triton_image or "").strip()
    if not image:
        raise LaunchError("--triton-launch=container needs --triton-image, e.g. nvcr.io/nvidia/tritonserver:24.10-py3")
    repository = Path(settings.triton_model_repository or DEMO_REPOSITORY).resolve()
    if not repository.is_dir():
        raise LaunchError(f"--triton-model-repository from {sources.get('triton_model_repository', 'default')}: "
                          f"{repository} is not a directory")
    shm_size = str(getattr(settings, "triton_shm_size", None) or DEFAULT_SHM_SIZE).strip()
    if not _SHM_SIZE.match(shm_size):
        raise LaunchError(f"--triton-shm-size from {sources.get('triton_shm_size', 'default')}: expected a size "
                          f"like 1g, 512m or 268435456, got {shm_size!r}")
    gpus = parse_gpus(settings.triton_gpus, sources.get("triton_gpus", "default"))
    if host_ports is None:
        host_ports = {port: free_port() for port in (HTTP_PORT, GRPC_PORT, METRICS_PORT)}
    extra_args = settings.section_model("server").args
    ulimits_text = getattr(settings, "triton_ulimits", None) or DEFAULT_ULIMITS
    try:
        ulimits = parse_ulimits(ulimits_text)
    except ValueError as exc:
        raise LaunchError(f"--triton-ulimits from {sources.get('triton_ulimits', 'default')}: {exc}") from None
    origins = getattr(settings, "origins", {})
    pod = deployment_limits(settings)
    if pod is not None and pod.shm_bytes:
        shm_size = str(pod.shm_bytes)
    return ContainerSpec(image, server_command(exit_timeout_s, extra_args, pod.flags if pod else ()), repository, gpus,
                         shm_size.lower(), dict(host_ports), bind_address, environment=dict(pod.environment) if pod else {},
                         ulimits=ulimits,
                         ulimits_origin=origins.get("triton_ulimits", sources.get("triton_ulimits", "default")), pod=pod)
