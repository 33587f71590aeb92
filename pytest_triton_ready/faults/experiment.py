"""One skeleton for every fault experiment (PERF-4): traffic, steady state, fault, settle,
verdict, restore. The unary experiments (faults/reload_experiments.py, crash_experiments.py,
declared_experiments.py, started from faults/injector.py), the streaming ones
(faults/stream_experiments.py) and a fleet replica's death (fleet/death.py) all run through it.

An `Experiment` states only what is its own: why it cannot run here (`unavailable`), what it
prepares before the traffic (`prepare`), its traffic (`open_traffic`: unary, streamed, or through
a balancer), what the steady state is (`steady_state`, by default the timeline rule), the moment
for the fault (`ready_for_fault`, e.g. a request in flight), the fault and what it observes under
traffic (`fault`), what it releases after the traffic (`release`), how it reads the outcome
(`verdict`), whether the fault exercised what the check judges (`exercised`), and how the server
is put back (`restore`, with `restore_advice` saying what state a failed restore may leave and
what to do). `run_experiment` is the one place where these are called in order:

    unavailable? -> INCOMPLETE, nothing touched
    prepare
    traffic:  steady_s of traffic -> steady state holds? -> ready for the fault (within
              ready_timeout_s)? -> fault(traffic) -> settle_s
              (no steady state, or never ready: INCOMPLETE, no fault injected)
    release                         (finally)
    verdict                         (from the traffic's timeline)
    exercised?                      (a fault that did not take, or did not exercise what the check
                                     judges: INCOMPLETE, never PASS)
    restore                         (finally, on every path once prepare began, exceptions included)

A restore that fails, returns a reason or raises, becomes `outcome.restore_error` plus
`outcome.restore_advice`: `record_outcome` turns them into an error finding. Each phase is a
progress step named after the experiment (`server restart (scale): fault injected (SIGKILL), ...`);
`note_fault` and `mark` make the experiment's own events steps too.
"""

from __future__ import annotations

import time
from typing import Any

from .. import progress
from ..load.runner import TrafficView
from .outcomes import Outcome
from .probes import wait_until
from .timeline import SteadyState, steady_state


class Experiment:
    """Hooks of one fault experiment; subclasses override what they need."""

    name = "experiment"
    outcome_type: type[Outcome] = Outcome
    ready_timeout_s = 10.0  # the longest wait for `ready_for_fault` once the steady state held

    def __init__(self, model: str | None, plan: Any, success_rate_min: float = 0.999) -> None:
        self.model = model
        self.plan = plan
        self.success_rate_min = success_rate_min
        self.outcome = self.outcome_type(self.name, model)
        self.fault_attempted = False  # set before the fault action runs: restore must undo even a half fault

    # -- hooks -------------------------------------------------------------------------------------
    def unavailable(self) -> str | None:
        """Why this experiment cannot run here (INCOMPLETE, nothing is touched), or None."""
        return None

    def prepare(self) -> None:
        """Before the traffic: probers, reference answers, scratch servers. May set
        `outcome.incomplete` to stop here (restore still runs)."""

    def open_traffic(self) -> Any:
        """The open-loop traffic (a context manager with timeline_so_far, elapsed_s, event, result)."""
        raise NotImplementedError

    @property
    def rate_per_s(self) -> float | None:
        """The traffic's rate, for progress lines (None: closed loop)."""
        return getattr(self.plan, "rate_per_s", None)

    @property
    def steady_s(self) -> float:
        """Traffic before the steady state is judged."""
        return self.plan.steady_s

    def steady_state(self, traffic: TrafficView) -> SteadyState:
        """What the traffic so far proved about the service: by default enough requests answered,
        the success rate at `success_rate_min` and no drop (`timeline.steady_state`)."""
        bins, _ = traffic.timeline_so_far()
        return steady_state(bins, 0.0, traffic.elapsed_s(), self.success_rate_min)

    def ready_for_fault(self, traffic: TrafficView) -> str | None:
        """None when this is the moment for the fault, else what is still missing (polled until
        `ready_timeout_s`; still missing then: INCOMPLETE, no fault injected). E.g. SIGTERM needs
        a request in flight, or the drain it judges is not exercised."""
        return None

    def fault(self, traffic: TrafficView) -> None:
        """Inject the fault and observe, under traffic, once the steady state held."""
        raise NotImplementedError

    @property
    def settle_s(self) -> float:
        """Traffic after the fault (and any recovery), before the traffic stops."""
        return self.plan.settle_s

    @property
    def baseline_step(self) -> str:
        """The progress line for the traffic before the fault."""
        rate = self.rate_per_s
        return (f"baseline, {self.steady_s:g} s of traffic" + (f" at {rate:g} requests/s" if rate else "")
                + " before the fault")

    @property
    def settle_step(self) -> str:
        """The progress line for the traffic after the fault."""
        return f"settle, {self.settle_s:g} s more traffic after the recovery"

    def release(self) -> None:
        """After the traffic, on every path: close what prepare opened."""

    def verdict(self) -> None:
        """Read the traffic's timeline and the observations into the outcome."""

    def exercised(self) -> str | None:
        """After the verdict, once a fault was attempted: None when the fault took effect and
        exercised what the check judges, else why not (then INCOMPLETE, never PASS): a kill that
        did not take, a SIGTERM with nothing in flight."""
        return None

    def restore(self) -> str | None:
        """Put the server back for the checks after this one. None, or why it failed."""
        return None

    def restore_advice(self) -> str:
        """What state a failed restore may leave the server in, and what to do about it."""
        return "the server may not be in the state the checks after this one expect: restart it before trusting them"

    # -- what the skeleton records -----------------------------------------------------------------
    @property
    def label(self) -> str:
        """The experiment and its model, for progress lines: `server restart (scale)`."""
        return f"{self.name} ({self.model})" if self.model else self.name

    def note_fault(self, traffic: Any, event: str) -> None:
        """Mark the fault on the timeline; from here on restore must undo it."""
        self.fault_attempted = True
        traffic.event(event)
        progress.step(f"{self.label}: fault injected ({event}), observing the recovery")

    def mark(self, traffic: Any, event: str) -> None:
        """Mark a later event on the timeline (e.g. the recovery action), shown as progress too."""
        traffic.event(event)
        progress.step(f"{self.label}: {event}")


def run_experiment(experiment: Experiment) -> Outcome:
    """Run `experiment` through the skeleton (see the module docstring); returns its Outcome."""
    outcome = experiment.outcome
    reason = experiment.unavailable()
    if reason:
        outcome.incomplete = reason
        return outcome
    failure: BaseException | None = None
    try:
        experiment.prepare()
        if outcome.incomplete is None:
            _under_traffic(experiment)
    except BaseException as exc:
        failure = exc
        raise
    finally:
        _restore(experiment, failure)
    return outcome


def _under_traffic(experiment: Experiment) -> None:
    outcome = experiment.outcome
    traffic = None
    try:
        traffic = experiment.open_traffic()
        with traffic:
            progress.step(f"{experiment.label}: {experiment.baseline_step}")
            time.sleep(experiment.steady_s)
            _fault_when_ready(experiment, traffic)
    finally:
        try:
            experiment.release()
        finally:
            if traffic is not None:
                outcome.traffic = traffic.result
    experiment.verdict()
    if experiment.fault_attempted and outcome.incomplete is None:
        outcome.incomplete = experiment.exercised()


def _fault_when_ready(experiment: Experiment, traffic: Any) -> None:
    """The fault, once the steady state held and the experiment is ready for it; else INCOMPLETE."""
    outcome = experiment.outcome
    steady = experiment.steady_state(traffic)
    if not steady.holds:
        outcome.steady = steady
        outcome.incomplete = f"no steady state before the fault, so no fault was injected: {steady.reason}"
        return
    progress.step(f"{experiment.label}: injecting the fault")
    missing: list[str | None] = [experiment.ready_for_fault(traffic)]
    if missing[-1] is not None:
        def ready() -> bool:
            missing.append(experiment.ready_for_fault(traffic))
            return missing[-1] is None

        # Polled tightly and followed by the fault at once: the moment (a request in flight) may last milliseconds.
        if wait_until(ready, experiment.ready_timeout_s, 0.0005) is None:
            outcome.incomplete = (f"{missing[-1]} within {experiment.ready_timeout_s:g} s of a steady state, so no "
                                  "fault was injected")
            return
    experiment.fault(traffic)
    progress.step(f"{experiment.label}: {experiment.settle_step}")
    time.sleep(experiment.settle_s)


def _restore(experiment: Experiment, failure: BaseException | None) -> None:
    outcome = experiment.outcome
    progress.step(f"{experiment.label}: restore")
    try:
        error = experiment.restore()
    except Exception as exc:  # a restore that raises is a failed restore, reported like one
        error = f"{type(exc).__name__}: {one_line(exc)}"
    if not error:
        return
    outcome.restore_error = error
    outcome.restore_advice = experiment.restore_advice()
    if failure is not None and hasattr(failure, "add_note"):  # Python 3.11+: shown with the traceback
        failure.add_note(outcome.restore_finding())


def one_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None)
    text = text() if callable(text) else (text or str(exc) or type(exc).__name__)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
