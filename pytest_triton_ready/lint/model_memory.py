"""A model's GPU memory, measured: GPU memory used with the model unloaded, then loaded again.

Measuring unloads the model for a moment, so it is done only on a server this run launched, or
where the YAML allows it (`lint: {measure_model_memory: true}`). Anything else that allocates GPU
memory during the measurement is counted too; the delta is what the rule sees.
"""

from __future__ import annotations

import time

from ..errors import TritonReadyError

NVML_SETTLE_S = 0.5
METRICS_SETTLE_S = 2.5  # Triton refreshes nv_gpu_* every --metrics-interval-ms (2000 ms by default)
READY_TIMEOUT_S = 120.0


class NotMeasured(TritonReadyError, RuntimeError):
    """Why a model's memory was not measured; the lint rule reports it as an info finding."""


def memory_by_gpu(readings) -> dict[str, float]:
    """GPU uuid -> memory used, from one set of GpuReadings."""
    return {r.uuid: r.memory_used_bytes for r in readings if r.memory_used_bytes is not None}


def memory_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Per-GPU growth between two readings; a GPU missing from either is left out."""
    return {uuid: max(0.0, after[uuid] - before[uuid]) for uuid in after if uuid in before}


def measure_model_memory(client, reader, model: str) -> dict[str, float]:
    """GPU uuid -> bytes the model holds, from readings with it unloaded and loaded again.

    Raises NotMeasured with the reason when the GPUs cannot be read; the model is loaded again
    whatever happens.
    """
    def settled_reading() -> dict[str, float]:
        time.sleep(NVML_SETTLE_S if reader.source == "nvml" else METRICS_SETTLE_S)
        readings = reader.read()
        if not readings:
            raise NotMeasured(f"the GPUs could not be read: {reader.unavailable_reason}")
        return memory_by_gpu(readings)

    client.unload(model)
    try:
        _wait(lambda: not client.model_ready(model), f"{model} did not unload")
        before = settled_reading()
    finally:
        client.load(model)
    _wait(lambda: client.model_ready(model), f"{model} did not become ready again after loading")
    return memory_delta(before, settled_reading())


def _wait(condition, failure: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise NotMeasured(failure + f" within {READY_TIMEOUT_S:g} s")
        time.sleep(0.2)
