"""Time estimates of a run, from the settings alone (measurement windows, sweep points, soak
duration, fault experiments, number of models), so the plan can show them before anything is sent,
and the run budget built from them (`from_settings`, `BudgetPlugin`: pytest_triton_ready/budget.py
holds the budget while the run goes)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .budget import LOAD_CHECKS, READING_CHECK_S, RunBudget, activate
from .duration import format_duration
from .launchers.embedded import DEMO_REPOSITORY
from .launchers.registry import launcher_kind

SERVER_START_S = 10.0  # an experiment's restart of the server, or a second server for a new version
FAULT_KINDS_BUILT_IN = 5  # forced reload, new version, dead instance, crash + restart, SIGTERM
RESTARTS_LOADING_EVERY_MODEL = 2  # the crash + restart, and SIGTERM's restore: the server loads every model first
MODEL_LOAD_S = 2.0  # one model loaded again on such a restart (python backend stubs on a 2-core host, measured)
DEFAULT_SWEEP_TOP = 64  # PERF-2's top concurrency when no max_batch_size is known


# -- estimates -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RepositoryShape:
    """What the estimates need to know about the models: how many, how many batch, sweep tops."""

    models: int
    batched: int
    sweep_points: list[int]  # PERF-2 points per model
    known: bool  # False: the models are not known before the server is asked (attached, no list)


@dataclass(frozen=True)
class PhaseEstimate:
    check_id: str
    seconds: float
    how: str
    most_s: float | None = None  # when every measurement runs to load_max_windows (it does not settle)


def point_seconds(settings: Any) -> float:
    """One measured load point: warm-up, then windows until stable and valid. The estimate is the
    least that can decide: enough windows for the stability rule and the minimum duration."""
    value = lambda name: settings.threshold(name).value  # noqa: E731
    windows = max(value("load_stability_windows"), math.ceil(value("load_min_duration_s") / value("load_window_s")))
    return value("load_warmup_s") + windows * value("load_window_s")


def point_seconds_max(settings: Any) -> float:
    value = lambda name: settings.threshold(name).value  # noqa: E731
    return value("load_warmup_s") + value("load_max_windows") * value("load_window_s")


def repository_shape(settings: Any) -> RepositoryShape:
    """The models' count, batched count and PERF-2 sweep points, read from the model repository's
    config.pbtxt files (never from the server); a run on an attached server without a model list
    estimates for one model."""
    cap = int(settings.threshold("curve_max_concurrency").value)
    configs = _configs(settings)
    if settings.triton_models:
        configs = {name: configs.get(name, "") for name in settings.triton_models}
    if not configs:
        return RepositoryShape(1, 1, [_points(cap or DEFAULT_SWEEP_TOP)], known=False)
    points, batched = [], 0
    for text in configs.values():
        batch = _int(r"max_batch_size\s*:\s*(\d+)", text, 0)
        instances = sum(int(n) for n in re.findall(r"count\s*:\s*(\d+)", text)) or 1
        batched += batch > 0 and "sequence_batching" not in text  # CFG-2 judges dynamic batching
        points.append(_points(cap or (2 * max(batch, 1) * instances if text else DEFAULT_SWEEP_TOP)))
    return RepositoryShape(len(configs), batched, points, known=True)


def _configs(settings: Any) -> dict[str, str]:
    """The config.pbtxt of each model in the repository the launcher serves; none for a server the
    run does not start (its repository is not here to read)."""
    if not launcher_kind(settings.launch).capabilities.owns_process:
        return {}
    repository = settings.triton_model_repository or DEMO_REPOSITORY
    if not Path(repository).is_dir():
        return {}
    return {path.parent.name: path.read_text(errors="replace") for path in sorted(Path(repository).glob("*/config.pbtxt"))}


def _int(pattern: str, text: str, default: int) -> int:
    match = re.search(pattern, text)
    return int(match.group(1)) if match else default


def _points(top: int) -> int:
    """Concurrency 1, 2, 4, ... up to `top`: the doubling sweep's points."""
    return max(1, int(math.log2(max(top, 1))) + 1)


def estimates(settings: Any, check_ids: Iterable[str] | None = None) -> list[PhaseEstimate]:
    """Seconds per check id in scope, with how each was derived. Check ids that only read get
    READING_CHECK_S each."""
    shape = repository_shape(settings)
    point = point_seconds(settings)
    most = point_seconds_max(settings)
    ids = sorted(set(check_ids)) if check_ids is not None else None
    per_model = "" if shape.known else " (models not known before the server is asked: per model)"
    out = {
        "CFG-2": PhaseEstimate("CFG-2", shape.batched * point,
                               f"{shape.batched} batched model(s) x 1 point x {point:g} s", shape.batched * most),
        "PERF-1": PhaseEstimate("PERF-1", shape.models * point, f"{shape.models} model(s) x 1 point x {point:g} s",
                                shape.models * most),
        "PERF-2": PhaseEstimate("PERF-2", sum(shape.sweep_points) * point,
                                f"{sum(shape.sweep_points)} sweep points ({'+'.join(map(str, shape.sweep_points))} "
                                f"per model, fewer where throughput plateaus) x {point:g} s", sum(shape.sweep_points) * most),
    }
    if settings.triton_soak:
        out["PERF-3"] = PhaseEstimate("PERF-3", settings.triton_soak + point,
                                      f"soak {settings.triton_soak:g} s + a rate probe of {point:g} s",
                                      settings.triton_soak + most)
    faults = settings.section_model("faults")
    experiment = faults.steady_s + faults.observe_s + faults.settle_s
    reloading = RESTARTS_LOADING_EVERY_MODEL * shape.models * MODEL_LOAD_S
    out["PERF-4"] = PhaseEstimate("PERF-4", FAULT_KINDS_BUILT_IN * (experiment + SERVER_START_S) + reloading,
                                  f"{FAULT_KINDS_BUILT_IN} fault experiments x ({experiment:g} s of traffic + "
                                  f"{SERVER_START_S:g} s recovery) + {RESTARTS_LOADING_EVERY_MODEL} restarts x "
                                  f"{shape.models} model(s) x {MODEL_LOAD_S:g} s of loading")
    chosen = ids if ids is not None else sorted(out)
    result = []
    for check_id in chosen:
        estimate = out.get(check_id) or PhaseEstimate(check_id, READING_CHECK_S, "reads only")
        scales = check_id in ("CFG-2", "PERF-1", "PERF-2", "PERF-4")  # the others do not grow with the models
        result.append(PhaseEstimate(estimate.check_id, estimate.seconds, estimate.how + (per_model if scales else ""),
                                    estimate.most_s))
    return result


def estimate_block(settings: Any, check_ids: Iterable[str] | None = None) -> list[str]:
    """The plan's lines: the estimate per phase (the load-bearing ones one by one), the total and
    the budget's share of each."""
    rows = estimates(settings, check_ids)
    total = sum(r.seconds for r in rows)
    most = sum(r.most_s or r.seconds for r in rows)
    budget_s = settings.triton_budget
    head = (f"  time estimate: about {format_duration(total)} of checks, up to {format_duration(most)} when no "
            f"measurement settles before load_max_windows (a point: {point_seconds(settings):g} s, up to "
            f"{point_seconds_max(settings):g} s)")
    if budget_s:
        head += f"; budget {format_duration(budget_s)} (run.budget / --triton-budget)"
    lines = [head]
    reading = [r for r in rows if r.how == "reads only"]
    for row in rows:
        if row.how == "reads only":
            continue
        share = f", budget share {format_duration(budget_s * row.seconds / total)}" if budget_s and total else ""
        upper = f" (up to {format_duration(row.most_s)})" if row.most_s and row.most_s > row.seconds else ""
        lines.append(f"    {row.check_id:8} ~{format_duration(row.seconds)}{upper}: {row.how}{share}")
    if reading:
        seconds = sum(r.seconds for r in reading)
        lines.append(f"    {'others':8} ~{format_duration(seconds)}: {len(reading)} reading check(s) x "
                     f"{READING_CHECK_S:g} s")
    if budget_s and total > budget_s:
        lines.append("    the estimate is above the budget: checks that find their share spent are INCOMPLETE "
                     "naming the budget")
    return lines


def from_settings(settings: Any, check_ids: Iterable[str]) -> RunBudget | None:
    if not settings.triton_budget:
        return None
    return RunBudget(settings.triton_budget, {e.check_id: e.seconds for e in estimates(settings, check_ids)})


class BudgetPlugin:
    """The pytest hooks of a run with a budget (registered by the plugin when one is set)."""

    def __init__(self, settings: Any, identify: Callable[[Any], tuple[str, ...] | None], recorder_key: Any) -> None:
        self.settings = settings
        self.identify = identify  # a test item -> (check id, ...), None for a test that is no check
        self.recorder_key = recorder_key  # where the plugin stashes a check's CheckRecorder
        self.budget: RunBudget | None = None

    def pytest_collection_finish(self, session: Any) -> None:
        ids = {identity[0] for identity in map(self.identify, session.items) if identity is not None}
        self.budget = from_settings(self.settings, ids)

    @pytest.hookimpl(trylast=True)  # after the plugin made the check's recorder
    def pytest_runtest_setup(self, item: Any) -> None:
        identity = self.identify(item)
        recorder = item.stash.get(self.recorder_key, None)
        if self.budget is None or identity is None or recorder is None:
            return
        self.budget.enter(identity[0])
        activate(self.budget, identity[0], recorder)
        if identity[0] not in LOAD_CHECKS:
            return  # a check that reads takes a second or so: its time is reserved in the estimates
        reason = self.budget.refusal(identity[0], f"{getattr(item, 'originalname', item.name)} (not started)")
        if reason:
            activate(None)
            recorder.incomplete(reason)

    def pytest_runtest_teardown(self, item: Any) -> None:
        activate(None)


__all__ = ["BudgetPlugin", "PhaseEstimate", "RepositoryShape", "estimate_block", "estimates", "from_settings", "point_seconds",
           "point_seconds_max", "repository_shape"]
