"""What this run measured, gathered for the deployment's rules: the facts PERF-2, PERF-3 and PERF-4
left (the server's CPU at capacity, start-to-ready, drain, memory peak and slope), the models' configs (python backend, KIND_GPU
instance groups) and the metric names the server exports; each one missing says why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..facts import Capacity, CapacityPlan, Drain, Facts, ServerStart, SoakMemory
from .judgement import Measured


def _not_published(kind: type, what: str) -> str:
    return f"{what} comes from {kind.producer}, which did not run or published none in this run"


def gpus_needed(configs: Mapping[str, dict[str, Any]]) -> dict[str, int]:
    """Model -> GPUs its KIND_GPU instance groups reference (a group without `gpus` takes any one)."""
    needed = {}
    for model, config in configs.items():
        groups = [g for g in config.get("instance_group") or [] if g.get("kind") == "KIND_GPU"]
        if groups:
            ids = {gpu for group in groups for gpu in group.get("gpus") or []}
            needed[model] = max(1, len(ids))
    return needed


def measured_from(facts: Facts, configs: Mapping[str, dict[str, Any]] | None, exported: frozenset[str] | None,
                  why_not_exported: str | None, leak_min_s: float, server_version: str | None = None,
                  inside_limits: str | None = None) -> Measured:
    """The run's measurements; `configs` the models in scope (None where they could not be read)."""
    missing: dict[str, str] = {}
    start, drain, memory = facts.get(ServerStart), facts.get(Drain), facts.get(SoakMemory)
    if start is None:
        missing["start_to_ready_s"] = _not_published(ServerStart, "the start-to-ready time")
    if drain is None:
        missing["drain_s"] = missing["refused_after_sigterm"] = _not_published(Drain, "the drain under traffic")
    slope = slope_high = None
    if memory is None:
        missing["peak_rss_bytes"] = missing["memory_slope_mb_h"] = _not_published(
            SoakMemory, "the server's peak memory (its process tree's RSS)")
    elif not memory.leak_judged:
        missing["memory_slope_mb_h"] = (
            f"PERF-3's soak ran {memory.span_s:.0f} s after warm-up, shorter than soak_leak_min_duration_s "
            f"({leak_min_s:.0f} s): its memory slope cannot be told from warm-up (--triton-soak=30m or longer)")
    else:
        slope, slope_high = memory.slope_mb_h, memory.slope_high_mb_h
        if slope is None:
            missing["memory_slope_mb_h"] = "PERF-3's soak read too few memory samples after warm-up to fit a slope"
    capacities = facts.of(Capacity)
    cores = [c.server_cpu_cores for c in capacities.values() if c.server_cpu_cores is not None]
    if not capacities:
        missing["cpu_cores_at_capacity"] = _not_published(Capacity, "the server's CPU at the measured capacity")
    elif not cores:
        missing["cpu_cores_at_capacity"] = ("PERF-2 measured the capacity but not the server's CPU at it: the "
                                            "server's processes are not visible from this runner (an attached "
                                            "server); the capacity in the report holds only outside this limit")
    plan = facts.get(CapacityPlan)
    if not capacities:
        missing["replica_capacity"] = _not_published(Capacity, "the capacity of one replica")
    if plan is None:
        missing["required_at_peak"] = _not_published(CapacityPlan, "the declared peak (operations.peak)")
    if configs is None:
        missing["python_models"] = missing["gpus_needed"] = "the models' configs could not be read from the server"
    if exported is None:
        missing["exported_metrics"] = f"the server's metrics could not be read: {why_not_exported}"
    return Measured(
        start_to_ready_s=start.ready_s if start else None, drain_s=drain.exit_s if drain else None,
        refused_after_sigterm=drain.refused_requests if drain else None,
        peak_rss_bytes=memory.peak_rss_bytes if memory else None, memory_slope_mb_h=slope,
        cpu_cores_at_capacity=max(cores) if cores else None,
        memory_slope_high_mb_h=slope_high,
        python_models=None if configs is None else tuple(sorted(m for m, c in configs.items()
                                                                if c.get("backend") == "python")),
        gpus_needed=None if configs is None else gpus_needed(configs), exported_metrics=exported,
        server_version=server_version, inside_limits=inside_limits,
        replica_capacity={m: c.max_throughput_within_slo_infer_s for m, c in capacities.items()} or None,
        required_at_peak={m: float(p["required_infer_s"]) for m, p in plan.models.items()
                          if p.get("required_infer_s") is not None} if plan else None, missing=missing)
