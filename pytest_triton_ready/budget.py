"""The run budget (`--triton-budget=15m`, YAML `budget:`, env TRITON_READY_BUDGET) and the time
estimates behind it.

The estimates come from the settings alone (measurement windows, sweep points, soak duration,
fault experiments, number of models), so the plan can show them before anything is sent. With a
budget, each check id gets a share of the time still left when it starts, in proportion to its
estimate among the checks not started yet: time a check does not use goes to the ones after it.
What the budget cuts is INCOMPLETE naming the budget and what was left out, never PASS:

- a test of a load-bearing check (LOAD_CHECKS: CFG-2, PERF-1 to PERF-4) that would start after
  the whole budget or its check id's share is spent does not run; the tests of one id share it;
- a load measurement that would start after its check id's share is spent does not start
  (`BudgetGuard` in front of the load engine).
Checks that only read always run: they take about a second each, reserved in the estimates.

A measurement asks how much time it may spend through the module-level API, which answers
"unbounded" when there is no budget or no check is running:

    from pytest_triton_ready import budget
    deadline = budget.current()
    seconds = deadline.allow(wanted_s)        # at most wanted_s, never more than the share left
    each = deadline.per_part(models_left)     # the next model's even part of what is left (None: unbounded)
    if deadline.expired: ...
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .soak.duration import format_duration

READING_CHECK_S = 1.0  # a check that reads (health, configs, metrics, malformed requests), per check id
SERVER_START_S = 10.0  # an experiment's restart of the server, or a second server for a new version
FAULT_KINDS_BUILT_IN = 5  # forced reload, new version, dead instance, crash + restart, SIGTERM
DEFAULT_SWEEP_TOP = 64  # PERF-2's top concurrency when no max_batch_size is known
LOAD_CHECKS = ("CFG-2", "PERF-1", "PERF-2", "PERF-3", "PERF-4")  # the ids whose time is load, not reading


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
    repository = settings.triton_model_repository
    if repository is None and settings.launch == "embedded":
        from .launchers.embedded import DEMO_REPOSITORY

        repository = DEMO_REPOSITORY
    if repository is None or settings.launch == "attach" or not Path(repository).is_dir():
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
                                f"per model) x {point:g} s", sum(shape.sweep_points) * most),
    }
    if settings.triton_soak:
        out["PERF-3"] = PhaseEstimate("PERF-3", settings.triton_soak + point,
                                      f"soak {settings.triton_soak:g} s + a rate probe of {point:g} s",
                                      settings.triton_soak + most)
    faults = settings.section_model("faults")
    experiment = faults.steady_s + faults.observe_s + faults.settle_s
    out["PERF-4"] = PhaseEstimate("PERF-4", FAULT_KINDS_BUILT_IN * (experiment + SERVER_START_S),
                                  f"{FAULT_KINDS_BUILT_IN} fault experiments x ({experiment:g} s of traffic + "
                                  f"{SERVER_START_S:g} s recovery)")
    chosen = ids if ids is not None else sorted(out)
    result = []
    for check_id in chosen:
        estimate = out.get(check_id) or PhaseEstimate(check_id, READING_CHECK_S, "reads only")
        scales = check_id in ("CFG-2", "PERF-1", "PERF-2")  # the others do not grow with the models
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


# -- the budget while the run goes ---------------------------------------------------------------
@dataclass
class Deadline:
    """The time one check may still spend (`time_left() is None`: unbounded)."""

    check_id: str = ""
    share_s: float | None = None
    started: float = 0.0
    clock: Callable[[], float] = time.monotonic

    def time_left(self) -> float | None:
        if self.share_s is None:
            return None
        return self.share_s - (self.clock() - self.started)

    def allow(self, seconds: float) -> float:
        """How much of `seconds` a measurement may spend: all of it, or what is left of the share."""
        left = self.time_left()
        return seconds if left is None else max(0.0, min(seconds, left))

    def per_part(self, parts: int) -> float | None:
        """An even share of what is left for each of `parts` still to measure (models, points):
        what a loop over models gives the next one. None when unbounded."""
        left = self.time_left()
        return None if left is None else max(0.0, left) / max(1, parts)

    @property
    def expired(self) -> bool:
        left = self.time_left()
        return left is not None and left <= 0


UNBOUNDED = Deadline()


@dataclass
class RunBudget:
    """The run's time, shared across check ids by their estimates as they start."""

    total_s: float
    estimates: dict[str, float]
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=0.0)
    deadlines: dict[str, Deadline] = field(default_factory=dict)
    cut: list[str] = field(default_factory=list)  # what the budget left out, in order

    def __post_init__(self) -> None:
        self.started = self.started or self.clock()

    @property
    def label(self) -> str:
        return f"run budget {format_duration(self.total_s)} (run.budget / --triton-budget)"

    def used(self) -> float:
        return self.clock() - self.started

    def left(self) -> float:
        return self.total_s - self.used()

    def enter(self, check_id: str) -> Deadline:
        """The check id's deadline; its share is fixed when its first test starts."""
        if check_id not in self.deadlines:
            waiting = [c for c in self.estimates if c not in self.deadlines and c != check_id]
            own = self.estimates.get(check_id, READING_CHECK_S)
            rest = own + sum(self.estimates[c] for c in waiting)
            share = max(0.0, self.left()) * (own / rest if rest else 1.0)
            self.deadlines[check_id] = Deadline(check_id, share, self.clock(), self.clock)
        return self.deadlines[check_id]

    def refusal(self, check_id: str, what: str, share: bool = True) -> str | None:
        """None while `what` may start; else the INCOMPLETE reason naming the budget and what it
        leaves out (recorded in `cut`). `share=False`: only the whole budget counts (a test that
        starts: one check id's tests run in different phases, and a reading test costs nothing)."""
        deadline = self.deadlines.get(check_id)
        if self.left() <= 0:
            why = f"spent after {format_duration(self.used())}"
        elif share and deadline is not None and deadline.expired:
            why = f"{check_id}'s share of it ({format_duration(deadline.share_s or 0)}) is spent"
        else:
            return None
        self.cut.append(f"{check_id}: {what}")
        return f"{self.label} {why}; left out: {what}"


_current: RunBudget | None = None
_current_check = ""
_current_recorder: Any = None  # the running check's CheckRecorder: a cut ends it through `incomplete`


def current() -> Deadline:
    """The running check's deadline: UNBOUNDED without a budget or outside a check."""
    if _current is None or not _current_check:
        return UNBOUNDED
    return _current.deadlines.get(_current_check, UNBOUNDED)


def activate(run_budget: RunBudget | None, check_id: str = "", recorder: Any = None) -> None:
    """Make `check_id` the running check of `run_budget` (the plugin calls this per test)."""
    global _current, _current_check, _current_recorder
    _current, _current_check, _current_recorder = run_budget, check_id, recorder


def cut(reason: str) -> None:
    """End the running check INCOMPLETE with `reason` (through its recorder when there is one)."""
    if _current_recorder is not None:
        _current_recorder.incomplete(reason)
    pytest.skip(f"incomplete: {reason}")


def running_check() -> tuple[RunBudget | None, str]:
    return _current, _current_check


def from_settings(settings: Any, check_ids: Iterable[str]) -> RunBudget | None:
    if not settings.triton_budget:
        return None
    return RunBudget(settings.triton_budget, {e.check_id: e.seconds for e in estimates(settings, check_ids)})


class BudgetGuard:
    """The load engine with the run budget in front: a measurement that would start after its
    check's share is spent does not start (the check becomes INCOMPLETE naming the budget)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def measure(self, model: str, **kwargs: Any) -> Any:
        run_budget, check_id = running_check()
        if run_budget is not None and check_id:
            load = (f"concurrency {kwargs['concurrency']}" if kwargs.get("concurrency") is not None
                    else f"{kwargs.get('rate')} requests/s")
            reason = run_budget.refusal(check_id, f"the measurement of {model} at {load} and what followed it")
            if reason:
                cut(reason)
        return self._engine.measure(model, **kwargs)


__all__ = ["BudgetGuard", "BudgetPlugin", "Deadline", "PhaseEstimate", "RunBudget", "UNBOUNDED", "activate", "current", "cut",
           "estimate_block", "estimates", "from_settings", "guard_budget", "point_seconds", "repository_shape"]


class BudgetPlugin:
    """The pytest hooks of a run with a budget (registered by the plugin when one is set)."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.budget: RunBudget | None = None

    def pytest_collection_finish(self, session: Any) -> None:
        from .plugin import _check_identity

        ids = {identity[0] for identity in map(_check_identity, session.items) if identity is not None}
        self.budget = from_settings(self.settings, ids)

    @pytest.hookimpl(trylast=True)  # after the plugin made the check's recorder
    def pytest_runtest_setup(self, item: Any) -> None:
        from .plugin import RECORDER_KEY, _check_identity

        identity = _check_identity(item)
        recorder = item.stash.get(RECORDER_KEY, None)
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


def guard_budget(engine: Any, settings: Any) -> Any:
    """`engine` itself without a budget, else the engine behind a BudgetGuard."""
    return BudgetGuard(engine) if settings.triton_budget else engine
