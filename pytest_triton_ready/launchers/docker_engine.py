"""The Docker engine as the container launcher meets it: where it is (and so which address the
container's ports bind to), the container's memory from its stats, and one readable line for what
the engine answered when a start failed."""

from __future__ import annotations

from typing import Any

from .container_spec import ContainerSpec
from .ulimits import format_ulimits, refusal_line


def container_memory(stats: dict[str, Any]) -> tuple[float | None, str | None]:
    """Memory in use from a Docker API stats document, as `docker stats` computes it."""
    memory = stats.get("memory_stats") or {}
    usage = memory.get("usage")
    if not usage:
        return None, ("container memory: the engine reports no memory usage for the container (no memory cgroup "
                      "for it: cgroups off or not delegated to the engine)")
    detail = memory.get("stats") or {}
    cache = detail.get("total_inactive_file", detail.get("inactive_file", 0)) or 0
    return float(usage - cache if cache < usage else usage), None


def engine_address() -> str:
    """Where docker-py looks for the engine, for messages."""
    import os

    host = os.environ.get("DOCKER_HOST")
    return f"DOCKER_HOST={host}" if host else "DOCKER_HOST unset: /var/run/docker.sock"


def short_error(exc: Exception, limit: int = 200) -> str:
    return " ".join(str(exc).split())[:limit] or type(exc).__name__


def binding_address() -> str:
    """Loopback when the engine runs on this host and shares its network with the runner; every
    interface otherwise, since the engine's loopback is not the runner's. A runner in a container
    (/.dockerenv) whose engine is reached through a local socket is on the engine's host when the
    engine answers with this host's name (podman in the same sandbox); otherwise it is a sibling
    container of the runner (the host's socket mounted in)."""
    try:
        from testcontainers.core.docker_client import get_docker_host
        from testcontainers.core.utils import inside_container
    except ImportError:
        return "127.0.0.1"
    host = get_docker_host() or ""
    if host.startswith(("tcp://", "ssh://", "http://", "https://")):
        return "0.0.0.0"
    if not inside_container():
        return "127.0.0.1"
    return "127.0.0.1" if engine_on_this_host() else "0.0.0.0"


def engine_on_this_host() -> bool:
    """The engine reports this host's name (docker info `Name`): it runs beside the runner."""
    import socket

    try:
        import docker

        client = docker.from_env(timeout=10)
        try:
            return client.info().get("Name") == socket.gethostname()
        finally:
            client.close()
    except Exception:
        return False


def docker_failure(exc: Exception, spec: ContainerSpec) -> str:
    """One readable line for what Docker answered."""
    text = " ".join(str(exc).split())
    refused = refusal_line(text, format_ulimits(spec.ulimits), spec.ulimits_origin)
    if refused:
        return refused
    if "ryuk" in text.lower():
        return ("testcontainers could not start its Ryuk reaper container (its image cannot be pulled here?): set "
                f"TESTCONTAINERS_RYUK_DISABLED=true ({text[:200]})")
    if "could not select device driver" in text or "nvidia-container" in text:
        return (f"Docker could not give the container GPUs ({spec.gpus.describe()}): install the NVIDIA "
                f"Container Toolkit, or run without GPUs with --triton-gpus=none ({text[:200]})")
    if any(word in text for word in ("Error while fetching server API version", "Connection refused",
                                     "FileNotFoundError", "No such file or directory")):
        return f"no Docker engine answers ({engine_address()}): {text[:200]}"
    if "not found" in text.lower() and spec.image in text:
        return f"image {spec.image} could not be pulled: {text[:200]}"
    return f"Docker failed to start {spec.image}: {type(exc).__name__}: {text[:300]}"


# The container's memory cgroup as it sees it: cgroup v1's memory.oom_control (oom_kill N) and
# max_usage_in_bytes, or cgroup v2's memory.events (oom_kill N) and memory.peak.
MEMORY_EVENTS_SCRIPT = ("cd /sys/fs/cgroup; cat memory/memory.oom_control 2>/dev/null || cat memory.events; "
                        "echo peak $(cat memory/memory.max_usage_in_bytes 2>/dev/null || cat memory.peak)")


def memory_events(text: str) -> tuple[int, float | None] | None:
    """(OOM kills, peak bytes) from MEMORY_EVENTS_SCRIPT's output; None where it has no counter."""
    kills = peak = None
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "oom_kill" and words[1].isdigit():
            kills = int(words[1])
        elif len(words) == 2 and words[0] == "peak" and words[1].isdigit():
            peak = float(words[1])
    return (kills, peak) if kills is not None else None


def killed_for_memory(kills: int, exit_code: int | None, spec: ContainerSpec, peak_bytes: float | None,
                      when: str) -> str:
    """The line that names an OOM kill: how many processes the kernel killed, the memory limit and
    the field it came from, the most the container used, and its exit code."""
    pod = spec.pod
    limit = pod.memory_bytes if pod is not None else None
    where = f" ({pod.origins.get('memory')} in {pod.container.split(': ', 1)[0]})" if limit and pod else ""
    limit_text = f"its memory limit {limit / 2**20:g} MiB{where}" if limit else "its memory limit"
    used = f"{peak_bytes / 2**20:.0f} MiB" if peak_bytes else "not read"
    killed = f"{kills} process{'es' if kills != 1 else ''}" if kills else "the server"
    return (f"the kernel OOM-killed {killed} of the tritonserver container {when} at {limit_text}; the most it "
            f"used: {used}; the container then ended with exit code {exit_code} (OOMKilled, as a pod's container is "
            "when any of its processes is: memory.oom.group on cgroup v2). Raise the limit above the server's peak "
            "(the deployment's CFG-4 memory rule says by how much)")
