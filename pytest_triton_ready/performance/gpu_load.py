"""PERF-1's advisory GPU item: every model driven at its saturation concurrency at once for the
stability windows, the GPUs' mean utilization judged against the gpu_utilization_min..max band,
the recommendation naming the way out (more instances or batching below the band; scale out
above it, said more urgently when the driven models' pending requests grow)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


def gpu_utilization_under_load(load: Any, check: CheckRecorder, concurrency: Mapping[str, int]) -> None:
    """Drive `concurrency` (model -> requests in flight) and judge the GPUs' utilization band;
    INCOMPLETE where no window could read it."""
    rules = load.rules()
    traffic = load.closed_loop(dict(concurrency), warmup_s=rules.warmup_s, window_s=rules.window_s, bin_s=None,
                               server_stats=True, duration_s=rules.window_s * rules.stability_windows + 0.05)
    result = load.run(traffic)
    windows = [w for w in result.windows if w.server and w.server.gpu_utilization is not None]
    if not windows:
        check.incomplete("GPU utilization could not be read during the load")
    utilization = sum(w.server.gpu_utilization for w in windows) / len(windows)
    check.chart("GPU utilization under load", "time (s)", "utilization (%)",
                {"GPU": [(round(w.end_s, 2), round(w.server.gpu_utilization * 100, 1)) for w in windows]})
    check.measure("throughput (all models)", round(result.stats.throughput_infer_s, 1), "infer/s")
    memory = [w.server.gpu_memory_used_fraction for w in windows if w.server.gpu_memory_used_fraction is not None]
    if memory:
        check.measure("GPU memory used (peak)", round(max(memory), 3), "ratio")
    judge_utilization_band(check, utilization, pending_requests(windows, concurrency))


def pending_requests(windows: list[Any], driven: Mapping[str, int]) -> list[float]:
    """Per window, the pending requests of the models driven, not their pipelines' steps (whose
    pending requests are the same requests again)."""
    return [sum(m.pending_requests or 0 for name, m in w.server.models.items() if name in driven) for w in windows]


def judge_utilization_band(check: CheckRecorder, utilization: float, pending: list[float]) -> None:
    """Mean utilization within gpu_utilization_min..max, each side with its recommendation."""
    low, high = check.threshold("gpu_utilization_min"), check.threshold("gpu_utilization_max")
    if not check.measure("GPU utilization (mean)", round(utilization, 3), "ratio", threshold=low, comparison=">="):
        check.recommend("The GPU idles under saturating load: add model instances (instance_group count) or "
                        "enable/enlarge dynamic batching so each execution carries more work.")
    growing = len(pending) >= 2 and pending[-1] > pending[0]
    if not check.measure("GPU utilization (mean) under the band's top", round(utilization, 3), "ratio",
                         threshold=high, comparison="<=",
                         finding=f"GPU utilization {utilization:.0%} is above {high.value:.0%}"
                                 + (" with a growing queue" if growing else "")):
        check.recommend("The GPU is saturated: add a GPU or replica (scale out) before the queue grows; "
                        f"pending requests rose from {pending[0]:.0f} to {pending[-1]:.0f}." if growing
                        else "The GPU runs at the top of its band: plan capacity before traffic grows.")
