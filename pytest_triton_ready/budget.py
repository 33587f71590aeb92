"""The run budget (`--triton-budget=15m`, YAML `run.budget`, env TRITON_READY_BUDGET) while the
run goes: each check id gets a share of the time still left when it starts, in proportion to its
estimate among the checks not started yet (pytest_triton_ready/estimates.py), so time a check does
not use goes to the ones after it. What the budget cuts is INCOMPLETE naming the budget and what was
left out, never PASS:

- a load-bearing check that starts after the whole budget is spent does not run;
- a load measurement that would start after its check's share is spent does not start
  (`BudgetGuard` in front of the load engine).

A measurement asks how much time it may spend through the module-level API, which answers
"unbounded" when there is no budget or no check is running:

    from pytest_triton_ready import budget
    deadline = budget.current()
    seconds = deadline.allow(wanted_s)        # at most wanted_s, never more than the share left
    each = deadline.per_part(models_left)     # the next model's even part of what is left (None: unbounded)
    if deadline.expired: ...
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from .duration import format_duration

READING_CHECK_S = 1.0  # a check that reads (health, configs, metrics, malformed requests), per check id
LOAD_CHECKS = ("CFG-2", "PERF-1", "PERF-2", "PERF-3", "PERF-4")  # the ids whose time is load, not reading


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


class BudgetGuard:
    """The load engine with the run budget in front: a measurement that would start after its
    check's share is spent does not start (the check becomes INCOMPLETE naming the budget)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def measure(self, model: str, **kwargs: Any) -> Any:
        run_budget, check_id = running_check()
        load = (f"concurrency {kwargs['concurrency']}" if kwargs.get("concurrency") is not None
                else f"{kwargs.get('rate')} requests/s")
        guard_measurement(run_budget, check_id, model, load)
        return self._engine.measure(model, **kwargs)


def guard_measurement(run_budget: RunBudget | None, check_id: str, model: str, load: str) -> None:
    """A measurement of `model` at `load` that would start after `check_id`'s share of the run
    budget is spent does not start: the check ends INCOMPLETE naming the budget (unary and
    streamed measurements alike)."""
    if run_budget is not None and check_id:
        reason = run_budget.refusal(check_id, f"the measurement of {model} at {load} and what followed it")
        if reason:
            cut(reason)


def guard_budget(engine: Any, settings: Any) -> Any:
    """`engine` itself without a budget, else the engine behind a BudgetGuard."""
    return BudgetGuard(engine) if settings.triton_budget else engine


__all__ = ["BudgetGuard", "Deadline", "LOAD_CHECKS", "READING_CHECK_S", "RunBudget", "UNBOUNDED", "activate", "current",
           "cut", "guard_budget", "guard_measurement", "running_check"]
