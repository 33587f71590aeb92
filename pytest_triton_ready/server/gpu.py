"""GPU readings: NVML (nvidia-ml-py) where the runner shares the server's host, Triton's nv_gpu_*
metrics otherwise (or when NVML is missing). With neither, `read()` returns nothing and
`unavailable_reason` says why, so a check can skip with that reason instead of passing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import TritonReadyError
from .metrics import MetricsError, MetricsSnapshot

LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one instant. Utilization is 0..1; memory in bytes; power in W; energy in J."""

    index: int
    uuid: str
    name: str
    utilization: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    power_w: float | None
    power_limit_w: float | None
    energy_j: float | None
    source: str

    @property
    def memory_used_fraction(self) -> float | None:
        if not self.memory_total_bytes or self.memory_used_bytes is None:
            return None
        return self.memory_used_bytes / self.memory_total_bytes


def readings_from_metrics(snapshot: MetricsSnapshot) -> list[GpuReading]:
    """Per-GPU readings from Triton's DCGM metrics (label gpu_uuid); empty when none are exported."""

    def value(name: str, uuid: str) -> float | None:
        samples = snapshot.select(name, gpu_uuid=uuid)
        return samples[0].value if samples else None

    uuids = sorted({s.labels["gpu_uuid"] for s in snapshot.samples
                    if s.name.startswith("nv_gpu_") and "gpu_uuid" in s.labels})
    return [
        GpuReading(i, uuid, uuid, value("nv_gpu_utilization", uuid), value("nv_gpu_memory_used_bytes", uuid),
                   value("nv_gpu_memory_total_bytes", uuid), value("nv_gpu_power_usage", uuid),
                   value("nv_gpu_power_limit", uuid), value("nv_energy_consumption", uuid), "triton-metrics")
        for i, uuid in enumerate(uuids)
    ]


def readings_from_nvml() -> list[GpuReading]:
    """Per-GPU readings from NVML; raises GpuUnavailable when NVML cannot start."""
    try:
        import pynvml
    except ImportError:
        raise GpuUnavailable("nvidia-ml-py is not installed (pip install 'pytest-triton-ready[gpu]')") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise GpuUnavailable(f"NVML could not start: {exc}") from None
    try:
        readings = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            readings.append(GpuReading(
                index, _text(pynvml.nvmlDeviceGetUUID(handle)), _text(pynvml.nvmlDeviceGetName(handle)),
                pynvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100.0, float(memory.used), float(memory.total),
                _optional(lambda h=handle: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
                _optional(lambda h=handle: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
                _optional(lambda h=handle: pynvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0),
                "nvml",
            ))
        return readings
    finally:
        pynvml.nvmlShutdown()


class GpuUnavailable(TritonReadyError, RuntimeError):
    """No way to read the GPUs; the message is the reason a check gives when it skips."""


class GpuReader:
    """Reads the server's GPUs from the best source available to this runner."""

    def __init__(self, scrape: Callable[[], MetricsSnapshot], same_host: bool) -> None:
        self._scrape = scrape
        self.same_host = same_host
        self.unavailable_reason: str | None = None
        self.source: str | None = None

    @classmethod
    def for_target(cls, target) -> GpuReader:
        host = urlsplit(target.endpoints.http_url).hostname or ""
        return cls(target.scrape_metrics, target.owns_process or host in LOOPBACK_HOSTS)

    def read(self) -> list[GpuReading]:
        """Readings of every GPU; empty (with `unavailable_reason` set) when none can be read."""
        reasons = []
        if self.same_host:
            try:
                readings = readings_from_nvml()
                self.source = "nvml"
                return readings
            except GpuUnavailable as exc:
                reasons.append(str(exc))
        else:
            reasons.append("the server runs on another host, so NVML here would read the wrong GPUs")
        try:
            readings = readings_from_metrics(self._scrape())
        except MetricsError as exc:
            readings = []
            reasons.append(str(exc))
        if readings:
            self.source = "triton-metrics"
            return readings
        reasons.append("Triton exports no nv_gpu_* metrics (no GPU, MIG, or DCGM unavailable)")
        self.unavailable_reason = "; ".join(reasons)
        return []


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _optional(read: Callable[[], float]) -> float | None:
    try:
        return float(read())
    except Exception:  # NVML raises NotSupported for some fields on some boards
        return None
