"""What the container launcher takes from the deployment's Triton container, so that the checklist
measures the server inside the pod it will run in: the memory and CPU limits, the size of
/dev/shm, the environment and the tritonserver flags, each with the field it came from, and what
could not be carried over, with the reason."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from .judgement import dig, full_field, quantity
from .manifest import Manifest
from .reading import TritonContainer

MIB = 2**20
RUNTIME_SHM_BYTES = 64 * MIB  # a container's /dev/shm without a volume there (containerd, CRI-O, Docker)
# Flags whose value the launcher sets itself: the repository it mounts and the ports it maps.
LAUNCHER_FLAGS = ("--model-repository", "--model-store", "--http-port", "--grpc-port", "--metrics-port",
                  "--http-address", "--grpc-address", "--metrics-address")


@dataclass(frozen=True)
class PodLimits:
    """The pod's view of the server, as `docker run` flags take it; None: no limit."""

    container: str  # "FILE document N: FIELD", the container they came from
    memory_bytes: int | None
    cpus: float | None
    shm_bytes: int | None  # None: no size of its own (a memory-backed emptyDir without sizeLimit)
    environment: dict[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    origins: dict[str, str] = field(default_factory=dict)  # what -> the field it came from
    left_out: tuple[str, ...] = ()  # what the launcher could not carry over, and why

    def describe(self) -> str:
        """One line for the run plan and the report."""
        memory = f"{self.memory_bytes / MIB:g} MiB" if self.memory_bytes else "no memory limit"
        cpus = f"{self.cpus:g} CPUs" if self.cpus else "no CPU limit"
        shm = f"/dev/shm {self.shm_bytes / MIB:g} MiB" if self.shm_bytes else "/dev/shm unsized (memory-backed)"
        extra = f", {len(self.environment)} environment variables" if self.environment else ""
        flags = f", flags {' '.join(self.flags)}" if self.flags else ""
        return f"{memory}, {cpus}, {shm}{extra}{flags} (from {self.container})"


def pod_limits(manifest: Manifest) -> PodLimits:
    """The limits of the deployment's first Triton container (the plan names which, when there are several)."""
    container = manifest.containers[0]
    origins: dict[str, str] = {}
    left_out: list[str] = []
    if len(manifest.containers) > 1:
        left_out.append(f"{len(manifest.containers) - 1} more Triton containers: the first one is launched")
    memory = _limit(container, "memory", origins)
    cpus = _limit(container, "cpu", origins)
    shm = _shared_memory(container, memory, origins)
    environment = _environment(container, origins, left_out)
    flags = _flags(container, origins, left_out)
    document = container.document
    return PodLimits(f"{document.path} document {document.index}: {container.field_prefix}",
                     int(memory) if memory else None, cpus, shm, environment, flags, origins, tuple(left_out))


def _limit(container: TritonContainer, name: str, origins: dict[str, str]) -> float | None:
    value = quantity(dig(container.container, "resources", "limits", name))
    if value is not None:
        origins[name] = full_field(container, f"resources.limits.{name}")
    return value


def _shared_memory(container: TritonContainer, memory: float | None, origins: dict[str, str]) -> int | None:
    """/dev/shm as the pod has it: a memory-backed emptyDir's sizeLimit (or, without one, the
    container's memory limit, which the volume's pages count against), another volume's or no
    volume's: the runtime's 64 MiB."""
    mounts = container.container.get("volumeMounts") or []
    mount = next((m for m in mounts if m.get("mountPath") == "/dev/shm"), None)
    volumes = {v.get("name"): (n, v) for n, v in enumerate(container.pod_spec.get("volumes") or [])}
    index, volume = volumes.get((mount or {}).get("name"), (None, {}))
    if mount is None or dig(volume, "emptyDir", "medium") != "Memory":
        origins["shm"] = (f"no memory-backed volume at /dev/shm in {full_field(container, 'volumeMounts')}: "
                          "the runtime's 64 MiB")
        return RUNTIME_SHM_BYTES
    size = quantity(dig(volume, "emptyDir", "sizeLimit"))
    origins["shm"] = full_field(container, f"pod:volumes[{index}].emptyDir")
    if size is None:
        return int(memory) if memory else None
    return int(size)


def _environment(container: TritonContainer, origins: dict[str, str], left_out: list[str]) -> dict[str, str]:
    environment = {}
    for number, entry in enumerate(container.container.get("env") or []):
        name = str(entry.get("name", ""))
        if "value" in entry:
            environment[name] = str(entry["value"])
            origins[f"env {name}"] = full_field(container, f"env[{number}]")
        elif "valueFrom" in entry:
            left_out.append(f"env {name}: valueFrom ({', '.join(entry['valueFrom'])}) is resolved by the cluster")
    if container.container.get("envFrom"):
        left_out.append("envFrom: ConfigMaps and Secrets are resolved by the cluster")
    return environment


def _flags(container: TritonContainer, origins: dict[str, str], left_out: list[str]) -> tuple[str, ...]:
    """The container's tritonserver flags, less those naming what the launcher provides itself."""
    words = container.args
    script = next((w for w in words if " " in w and "tritonserver" in w), None)
    if script is not None and not any(_is_program(w) for w in words):  # sh -c "tritonserver --flag ..."
        try:
            words = shlex.split(script)
        except ValueError:
            words = []
    start = next((n + 1 for n, w in enumerate(words) if _is_program(w)), None)
    if start is None:
        left_out.append("the tritonserver command line: the container does not start tritonserver by name")
        return ()
    kept: list[str] = []
    skip = False
    for word in words[start:]:
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        if name in LAUNCHER_FLAGS:
            left_out.append(f"{word}: the launcher serves the run's repository on its own ports")
            skip = "=" not in word
            continue
        kept.append(word)
    if kept:
        origins["flags"] = full_field(container, "args")
    return tuple(kept)


def _is_program(word: str) -> bool:
    return word.rsplit("/", 1)[-1] == "tritonserver"
