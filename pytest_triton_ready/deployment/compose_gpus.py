"""The GPUs a compose service is given, and the field that gives them: its device reservations
with the gpu capability (count, device_ids; all where neither is set), else `gpus:`, else the
nvidia runtime with NVIDIA_VISIBLE_DEVICES."""

from __future__ import annotations

from .compose_values import Service
from .resources import ALL_GPUS


def _add(total: int | str | None, more: int | str) -> int | str:
    return ALL_GPUS if ALL_GPUS in (total, more) else int(total or 0) + int(more)


def _device_count(service: Service, device: str) -> int | str:
    """The GPUs one device request names: its device_ids, else its count (all where left out)."""
    service.mapping(device)
    count, ids = service.get(f"{device}.count"), service.items(f"{device}.device_ids")
    if count is not None and ids:
        raise service.error(device, service.get(device), "sets both count and device_ids, which docker compose refuses")
    if ids:
        return len(ids)
    if count is None or count == "all" or (isinstance(count, int) and not isinstance(count, bool) and count < 0):
        return ALL_GPUS
    if isinstance(count, bool) or not isinstance(count, int):
        raise service.error(f"{device}.count", count, "is not a count (a whole number, or all)")
    return count


def _visible_devices(env: list[dict[str, str]]) -> int | str:
    """The GPUs the nvidia runtime gives: NVIDIA_VISIBLE_DEVICES of the environment, else the
    image's (all, in NVIDIA's images)."""
    value = next((entry["value"] for entry in env if entry["name"] == "NVIDIA_VISIBLE_DEVICES"), "all")
    if value == "all":
        return ALL_GPUS
    return 0 if value in ("none", "void", "") else len([d for d in value.split(",") if d.strip()])


def compose_gpus(service: Service, env: list[dict[str, str]]) -> tuple[int | str | None, str]:
    """The GPUs the service is given and the field that gives them: its device reservations with
    the gpu capability, else `gpus:`, else the nvidia runtime."""
    total: int | str | None = None
    at = "deploy.resources.reservations.devices"
    for number, _ in enumerate(service.items(at)):
        device = f"deploy.resources.reservations.devices[{number}]"
        if "gpu" in (service.items(f"{device}.capabilities")):
            total, at = _add(total, _device_count(service, device)), device
    gpus = service.get("gpus")
    if total is None and gpus == "all":
        total, at = ALL_GPUS, "gpus"
    elif total is None and gpus is not None:
        if isinstance(gpus, str):
            raise service.error("gpus", gpus, "is not all, or a list of devices")
        total, at = 0, "gpus"
        for number, _ in enumerate(service.items("gpus")):
            total = _add(total, _device_count(service, f"gpus[{number}]"))
    if total is None and service.text("runtime") == "nvidia":
        total, at = _visible_devices(env), "runtime"
    return total, at
