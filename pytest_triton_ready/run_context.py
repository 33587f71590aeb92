"""Context the report's header shows that Run.collect_context does not read itself: the GPUs."""

from __future__ import annotations

from typing import Any


def gpu_inventory(target) -> dict[str, Any]:
    """The server's GPUs (NVML on the same host, Triton's nv_gpu_* metrics otherwise), or none
    with the reason none is visible."""
    if target is None:
        return inventory(None, [], "no server was opened in this run")
    from .server.gpu import GpuReader

    reader = GpuReader.for_target(target)
    try:
        readings = reader.read()
    except Exception as exc:  # the report must still be written when the GPU read breaks
        return inventory(None, [], f"reading the GPUs failed: {exc}")
    return inventory(reader.source, readings, reader.unavailable_reason)


def inventory(source: str | None, readings: list, reason: str | None) -> dict[str, Any]:
    """The report's `context.gpus`: where the readings came from, one entry per GPU, and the
    reason when there is none."""
    return {
        "source": source if readings else None,
        "gpus": [
            {"index": r.index, "uuid": r.uuid, "name": r.name, "memory_total_bytes": r.memory_total_bytes,
             "memory_used_bytes": r.memory_used_bytes, "utilization": r.utilization,
             "power_limit_w": r.power_limit_w}
            for r in readings
        ],
        "unavailable_reason": None if readings else (reason or "no GPU was found"),
    }


def runner_versions() -> dict[str, str]:
    """Versions of the libraries that shape the measurements: pytest and tritonclient."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("pytest", "tritonclient"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found
