"""The fault experiment skeleton alone, with fake experiments and fake traffic (no server): the
order of the hooks, restore in a `finally` on every path, and a failed restore as an error finding."""

from __future__ import annotations

import pytest

from pytest_triton_ready.faults.experiment import Experiment, run_experiment
from pytest_triton_ready.faults.plan import FaultPlan
from pytest_triton_ready.faults.recording import record_outcome
from pytest_triton_ready.load.timeline import Bin

PLAN = FaultPlan(steady_s=0.0, settle_s=0.0)


class FakeTraffic:
    def __init__(self, calls, ok=True):
        self.calls = calls
        self.bins = [Bin(round(i * 0.1, 1), 4, 0 if ok else 4, 0, 5.0, 5.0) for i in range(10)]
        self.result = "traffic result"

    def __enter__(self):
        self.calls.append("traffic on")
        return self

    def __exit__(self, *exc):
        self.calls.append("traffic off")

    def timeline_so_far(self):
        return self.bins, []

    def elapsed_s(self):
        return 1.0

    def event(self, label):
        self.calls.append(f"event {label}")


class FakeExperiment(Experiment):
    name = "fake"

    def __init__(self, steady=True, fault_raises=None, restore_returns=None, restore_raises=None, unavailable=None):
        super().__init__("scale", PLAN)
        self.calls = []
        self.steady, self.fault_raises = steady, fault_raises
        self.restore_returns, self.restore_raises, self.why = restore_returns, restore_raises, unavailable

    def unavailable(self):
        return self.why

    def prepare(self):
        self.calls.append("prepare")

    def open_traffic(self):
        return FakeTraffic(self.calls, self.steady)

    def fault(self, traffic):
        self.note_fault(traffic, "fault")
        if self.fault_raises:
            raise self.fault_raises

    def release(self):
        self.calls.append("release")

    def verdict(self):
        self.calls.append("verdict")

    def restore(self):
        self.calls.append("restore")
        if self.restore_raises:
            raise self.restore_raises
        return self.restore_returns

    def restore_advice(self):
        return "scale may be left unloaded: load it again"


def test_hooks_run_in_order_and_restore_last():
    experiment = FakeExperiment()
    outcome = run_experiment(experiment)
    assert experiment.calls == ["prepare", "traffic on", "event fault", "traffic off", "release", "verdict", "restore"]
    assert outcome.incomplete is None and outcome.restore_error is None and outcome.restore_finding() is None
    assert outcome.traffic == "traffic result" and experiment.fault_attempted


def test_without_a_steady_state_no_fault_is_injected_and_restore_still_runs():
    experiment = FakeExperiment(steady=False)
    outcome = run_experiment(experiment)
    assert "event fault" not in experiment.calls and not experiment.fault_attempted
    assert experiment.calls[-1] == "restore"
    assert outcome.incomplete.startswith("no steady state before the fault, so no fault was injected: ")


def test_an_experiment_that_cannot_run_touches_nothing():
    experiment = FakeExperiment(unavailable="the server is attached")
    outcome = run_experiment(experiment)
    assert experiment.calls == [] and outcome.incomplete == "the server is attached"


def test_a_fault_that_raises_still_releases_and_restores_and_the_error_propagates():
    experiment = FakeExperiment(fault_raises=LookupError("no stub of scale"))
    with pytest.raises(LookupError, match="no stub of scale"):
        run_experiment(experiment)
    assert experiment.calls[-3:] == ["traffic off", "release", "restore"]
    assert "verdict" not in experiment.calls


def test_a_failed_restore_during_a_failure_is_noted_on_the_exception():
    experiment = FakeExperiment(fault_raises=LookupError("no stub"), restore_returns="the server was not ready")
    with pytest.raises(LookupError) as error:
        run_experiment(experiment)
    assert any("could not be restored after the fake (the server was not ready)" in n
               for n in getattr(error.value, "__notes__", [])) or not hasattr(error.value, "add_note")


@pytest.mark.parametrize("returns, raises, reason", [
    ("the server was not ready again within 60 s", None, "the server was not ready again within 60 s"),
    (None, RuntimeError("load refused\nmore"), "RuntimeError: load refused"),
])
def test_a_failed_restore_becomes_an_error_finding_with_state_and_advice(returns, raises, reason):
    outcome = run_experiment(FakeExperiment(restore_returns=returns, restore_raises=raises))
    assert outcome.restore_error == reason
    finding = outcome.restore_finding()
    assert finding == (f"the server could not be restored after the fake ({reason}); scale may be left unloaded: "
                       "load it again; the checks after this one may fail because of it")

    class Check:
        findings = []

        def finding(self, message, severity="error", **kwargs):
            self.findings.append((severity, message))

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    check = Check()
    outcome.traffic = None
    record_outcome(check, outcome)
    assert ("error", finding) in check.findings


def test_every_phase_of_an_experiment_is_a_progress_step_with_its_name():
    import itertools

    from pytest_triton_ready import progress

    lines = []
    ticks = itertools.count(0.0, 5.0)  # each reading of the clock is 5 s later: every step shows
    with progress.running("PERF-4 test_fake", lines.append, clock=lambda: next(ticks), quiet_s=3.0, heartbeat_s=600):
        run_experiment(FakeExperiment())
    steps = [line.split(" s: ", 1)[1] for line in lines]
    assert steps[0].startswith("fake (scale): baseline, 0 s of traffic at ") and steps[0].endswith(
        " requests/s before the fault")
    assert steps[1:] == ["fake (scale): injecting the fault", "fake (scale): fault injected (fault), observing the recovery",
                         "fake (scale): settle, 0 s more traffic after the recovery", "fake (scale): restore"]
