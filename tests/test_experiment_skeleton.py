"""The fault experiment skeleton alone, with fake experiments and fake traffic (no server): the
order of the hooks, restore in a `finally` on every path, and a failed restore as an error finding."""

from __future__ import annotations

import pytest
from loopback_http import serving

from pytest_triton_ready.faults.experiment import Experiment, run_experiment
from pytest_triton_ready.faults.recording import record_outcome
from pytest_triton_ready.faults.schema import FaultPlan
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
    if not hasattr(error.value, "add_note"):
        pytest.skip("exception notes need Python 3.11+")
    assert any("could not be restored after the fake (the server was not ready)" in n
               for n in getattr(error.value, "__notes__", []))


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


# -- the moment for the fault, and a fault that did not exercise the rule (issue: every PASS earned) --
class MomentExperiment(FakeExperiment):
    def __init__(self, moment=None, exercised=None):
        super().__init__()
        self.moment, self.why_not = moment, exercised
        self.ready_timeout_s = 0.05

    def ready_for_fault(self, traffic):
        return self.moment

    def exercised(self):
        return self.why_not


def test_a_fault_whose_moment_never_comes_is_not_injected_and_the_run_is_incomplete():
    experiment = MomentExperiment(moment="no request was in flight")
    outcome = run_experiment(experiment)
    assert "event fault" not in experiment.calls and not experiment.fault_attempted
    assert experiment.calls[-1] == "restore"
    assert outcome.incomplete == "no request was in flight within 0.05 s of a steady state, so no fault was injected"


def test_a_fault_that_did_not_exercise_what_the_check_judges_is_incomplete_never_a_pass():
    experiment = MomentExperiment(exercised="no death was observed")
    outcome = run_experiment(experiment)
    assert "event fault" in experiment.calls and experiment.calls[-1] == "restore"
    assert outcome.incomplete == "no death was observed"
    assert run_experiment(MomentExperiment()).incomplete is None


class Traffic:
    """Fake open-loop traffic with a live in-flight count and a real Timeline's events."""

    def __init__(self, in_flight=0, errors=0):
        from types import SimpleNamespace

        from pytest_triton_ready.load.timeline import Event

        self.in_flight = in_flight
        self.events = []
        self._event = Event
        self.bins = [Bin(round(i * 0.1, 1), 4, errors if i >= 5 else 0, 0, 5.0, 5.0) for i in range(10)]
        self.result = SimpleNamespace(timeline=SimpleNamespace(bins=self.bins, events=self.events),
                                      stats=SimpleNamespace(errors={"boom": errors} if errors else {}))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def timeline_so_far(self):
        return [b for b in self.bins if b.t_s < 0.5], list(self.events)

    def elapsed_s(self):
        return 0.5

    def event(self, name):
        self.events.append(self._event(0.5, name))


class Injector:
    """A fake FaultInjector: a server this run owns, one python stub per instance, probes that answer."""

    from pytest_triton_ready.faults.injector import FaultInjector

    _steady = FaultInjector._steady
    errors_after = staticmethod(FaultInjector.errors_after)

    def __init__(self, traffic, unhealthy=()):
        from types import SimpleNamespace

        from pytest_triton_ready.faults.probes import InstanceProbe

        self.plan = FaultPlan(steady_s=0.0, settle_s=0.0, observe_s=0.01, recovery_timeout_s=0.05)
        self.success_rate_min = 0.999
        self.traffic = traffic
        self.signals = []
        self.owns_process = True
        probe = InstanceProbe("scale", 8, 8 - len(unhealthy), unhealthy_instances=list(unhealthy))
        self.probe = SimpleNamespace(instances=2, take_reference=lambda: True, probe=lambda: probe,
                                     close=lambda: None)
        self.client = SimpleNamespace(get_status=lambda path: 200, load=lambda model: None,
                                      reconnect=lambda: None)
        launcher = SimpleNamespace(exit_timeout_s=0.01, log_text=lambda n: "", stop=lambda: None,
                                   start=lambda: None)
        self.target = SimpleNamespace(launcher=launcher, endpoints=SimpleNamespace(http_url="http://127.0.0.1:9"))
        self.processes = SimpleNamespace(tree=lambda: [], exit_code=lambda: 0,
                                         terminate_server=lambda: self.signals.append("SIGTERM"))

    def destructive_unavailable(self, kind):
        return None

    def stubs(self, model):
        from types import SimpleNamespace

        return [SimpleNamespace(instance="scale_0_0", pid=1)]

    def kill_stub(self, model):
        self.signals.append("SIGKILL")
        return self.stubs(model)[0]

    def prober(self, model):
        return self.probe

    def _traffic(self, model):
        return self.traffic

    def unload_and_load(self, model):
        pass

    def every_instance_answers(self, prober, traffic=None):
        return True

    def terminate_server(self):
        self.signals.append("SIGTERM")

    def restore(self, model):
        return None


def test_sigterm_with_nothing_in_flight_sends_no_signal_and_is_incomplete():
    from pytest_triton_ready.faults.crash_experiments import GracefulShutdown

    injector = Injector(Traffic(in_flight=0))
    experiment = GracefulShutdown(injector, "scale")
    experiment.ready_timeout_s = 0.05
    outcome = run_experiment(experiment)
    assert injector.signals == [] and not experiment.fault_attempted
    assert outcome.incomplete.startswith("no request was in flight within 0.05 s")


def test_sigterm_that_found_nothing_in_flight_at_the_signal_is_incomplete_not_a_pass():
    from pytest_triton_ready.faults.crash_experiments import NOTHING_IN_FLIGHT, GracefulShutdown

    experiment = GracefulShutdown(Injector(Traffic(in_flight=1)), "scale")
    assert experiment.exercised() == NOTHING_IN_FLIGHT  # in_flight_at_sigterm still 0
    experiment.outcome.in_flight_at_sigterm = 2
    assert experiment.exercised() is None
    assert NOTHING_IN_FLIGHT == "nothing was in flight at SIGTERM: the drain was not exercised"


def test_sigterm_with_a_request_in_flight_is_judged():
    from pytest_triton_ready.faults.crash_experiments import GracefulShutdown

    injector = Injector(Traffic(in_flight=1))
    outcome = run_experiment(GracefulShutdown(injector, "scale"))
    assert injector.signals == ["SIGTERM"] and outcome.in_flight_at_sigterm == 1
    assert outcome.incomplete is None


def test_a_dead_instance_kill_that_did_not_take_is_incomplete_never_a_pass():
    from pytest_triton_ready.faults.crash_experiments import InstanceRestart

    injector = Injector(Traffic())  # after the kill: no request failed, every instance answered
    outcome = run_experiment(InstanceRestart(injector, "scale"))
    assert injector.signals == ["SIGKILL"] and outcome.instance == "scale_0_0"
    assert outcome.incomplete.startswith("no death was observed: after the kill of scale_0_0 no request failed and "
                                         "the probe of every instance answered (8 of 8 probe requests answered")


@pytest.mark.parametrize("errors, unhealthy", [(3, ()), (0, ("scale_0_0",))])
def test_a_dead_instance_seen_by_the_traffic_or_the_probe_is_judged(errors, unhealthy):
    from pytest_triton_ready.faults.crash_experiments import InstanceRestart

    outcome = run_experiment(InstanceRestart(Injector(Traffic(errors=errors), unhealthy), "scale"))
    assert outcome.incomplete is None and outcome.death_observed


def test_a_server_that_goes_down_with_the_killed_stub_is_a_finding_not_an_error():
    """Seen once in five default demo runs: after the kill of one stub the server refused
    connections, and the TritonUnreachable of the next ready probe made the check an ERROR."""
    from pytest_triton_ready.faults.crash_experiments import InstanceRestart
    from pytest_triton_ready.faults.injector import FaultInjector
    from pytest_triton_ready.faults.judges import judge_dead_instance
    from pytest_triton_ready.server.client import TritonUnreachable

    injector = Injector(Traffic(errors=40))

    def refused(path):
        raise TritonUnreachable("cannot reach the server at http://127.0.0.1:8000: connection refused")

    injector.client.get_status = refused
    injector.processes.exit_code = lambda: -11
    injector.target.launcher.log_text = lambda n: "I1203 model loaded\nE1203 Stub process 'scale_0_0' is not healthy."
    injector.server_death = lambda exc: FaultInjector.server_death(injector, exc)
    outcome = run_experiment(InstanceRestart(injector, "scale"))
    assert outcome.incomplete is None and outcome.death_observed
    assert outcome.server_died == ("tritonserver exited with code -11; the last error in its log: "
                                   "E1203 Stub process 'scale_0_0' is not healthy.")
    check = _recorder()
    check.threshold = lambda name: None
    judge_dead_instance(check, outcome, "2.51.0", 10.0)
    assert [(f.severity, f.message) for f in check.result.findings] == [
        ("error", "scale: the kill of one python backend stub (scale_0_0) took the whole server down: "
         + outcome.server_died)]


# -- the streaming experiments through the skeleton, with fake streams --------------------------------
class Streams(Traffic):
    """Fake streamed traffic: tokens, an in-flight count, and the records a StreamingResult keeps."""

    def __init__(self, in_flight=0, records=(), errors=0, stuck=()):
        from types import SimpleNamespace

        super().__init__(in_flight=in_flight)
        self.bins = [Bin(round(i * 0.1, 1), 0, 0, 0, None, None) for i in range(10)]
        self.result = SimpleNamespace(timeline=SimpleNamespace(bins=self.bins, events=self.events), stats=SimpleNamespace(
            errors={"boom": errors} if errors else {}), streaming=SimpleNamespace(
            records=list(records), in_flight_at_stop=[], stats=SimpleNamespace(
                errors={"boom": errors} if errors else {}, stuck=list(stuck), count_errors=errors)))

    def tokens_so_far(self):
        return 100

    def in_flight_sent_before(self, t):
        return 0

    def stop(self):
        return self.result


def _stream_injector():
    from types import SimpleNamespace

    injector = Injector(None)
    injector.streaming_plan = lambda model: None
    injector.client = SimpleNamespace(model_config=lambda model: {"instance_group": [{"count": 1}]},
                                      reconnect=lambda: None)
    injector.target.client = injector.client
    injector.target.server_log = lambda lines: ""
    injector.target.settings = SimpleNamespace(headers={})
    return injector


def _stream_experiment(kind, streams, **options):
    from pytest_triton_ready.faults import stream_experiments

    injector = _stream_injector()
    experiment = getattr(stream_experiments, kind)(injector, "generate", max_tokens=8, deadline_s=1.0, **options)
    experiment.open_traffic = lambda: streams
    experiment.ready_timeout_s = 0.05
    return injector, experiment


def test_streaming_sigterm_with_no_stream_in_flight_sends_no_signal_and_is_incomplete():
    injector, experiment = _stream_experiment("StreamingSigterm", Streams(in_flight=0))
    outcome = run_experiment(experiment)
    assert injector.signals == [] and outcome.incomplete.startswith("no stream was in flight within 0.05 s")


def test_streaming_sigterm_whose_streams_all_ended_before_the_signal_is_incomplete_not_a_pass():
    from types import SimpleNamespace

    ended = SimpleNamespace(id="u0-r1", sent=1.0, end=2.0, final=True, error=None, tokens=8)  # long before the signal
    injector, experiment = _stream_experiment("StreamingSigterm", Streams(in_flight=1, records=[ended]))
    outcome = run_experiment(experiment)
    assert injector.signals == ["SIGTERM"] and outcome.in_flight_at_sigterm == 0
    assert outcome.incomplete == "nothing was in flight at SIGTERM: the drain was not exercised"


def test_streaming_sigterm_with_a_stream_in_flight_at_the_signal_is_judged():
    import time
    from types import SimpleNamespace

    live = SimpleNamespace(id="u0-r2", sent=time.monotonic(), end=None, final=True, error=None, tokens=32)
    _, experiment = _stream_experiment("StreamingSigterm", Streams(in_flight=1, records=[live]))
    outcome = run_experiment(experiment)
    assert outcome.incomplete is None and (outcome.in_flight_at_sigterm, outcome.finished) == (1, 1)
    assert outcome.exit_code == 0 and outcome.exit_s is not None


def test_a_streaming_stub_kill_that_did_not_take_is_incomplete_never_a_pass(monkeypatch):
    from pytest_triton_ready.faults import stream_experiments

    monkeypatch.setattr(stream_experiments, "DEAD_STUB_OBSERVE_S", 0.01)
    injector, experiment = _stream_experiment("StreamingDeadStub", Streams(), recovery_max_s=0.1)
    experiment._streams_serve = lambda: True
    outcome = run_experiment(experiment)
    assert injector.signals == ["SIGKILL"] and outcome.instance == "scale_0_0"
    assert outcome.incomplete.startswith("no death was observed: after the kill of stub scale_0_0 no stream failed "
                                         "or hung")
    assert outcome.recovered_s is not None  # the restore ran all the same


def test_a_streaming_stub_death_seen_as_a_hung_stream_is_judged(monkeypatch):
    from pytest_triton_ready.faults import stream_experiments

    monkeypatch.setattr(stream_experiments, "DEAD_STUB_OBSERVE_S", 0.01)
    _, experiment = _stream_experiment("StreamingDeadStub", Streams(stuck=["u1-r3"]), recovery_max_s=0.1)
    experiment._streams_serve = lambda: True
    outcome = run_experiment(experiment)
    assert outcome.incomplete is None and outcome.left_hanging == 1 and outcome.death_observed


def test_streams_are_steady_once_every_stream_produced_and_nothing_failed():
    from pytest_triton_ready.faults.timeline import streams_steady

    quiet = [Bin(0.0, 0, 0, 0, None, None)]
    assert streams_steady(quiet, 8, 4).holds
    assert streams_steady(quiet, 3, 4).reason == ("only 3 tokens came back over 4 streams before the fault (at least "
                                                  "one per stream is needed)")
    failing = streams_steady([Bin(0.0, 2, 1, 0, 5.0, 5.0)], 8, 4)
    assert not failing.holds and failing.reason == "1 streamed requests failed before the fault"


def _recorder():
    from pytest_triton_ready.record.model import Result
    from pytest_triton_ready.record.recorder import CheckRecorder

    return CheckRecorder(Result(check_id="PERF-4", phase="performance", title="t", nodeid="n"))


class FakeFaults:
    def __init__(self, unary=None, streaming=None, model=None, pipelines=None):
        self.plan = FaultPlan(model=model)
        self._unary, self._streaming, self._pipelines = unary, streaming, pipelines or {}

    def choose_model(self):
        return self._unary

    def choose_streaming_model(self):
        return self._streaming

    def pipeline_steps(self):
        return self._pipelines


def test_the_fault_model_is_a_unary_one_then_a_streaming_one_and_a_pipeline_step_is_warned():
    from pytest_triton_ready.faults.recording import fault_model

    assert fault_model(FakeFaults(unary="scale", streaming="generate"), _recorder()) == "scale"
    assert fault_model(FakeFaults(streaming="generate"), _recorder()) == "generate"
    check = _recorder()
    assert fault_model(FakeFaults(unary="scale", pipelines={"scale": ["ensemble_a"]}), check) == "scale"
    assert [f.message for f in check.result.findings] == [
        "scale is a step of ensemble_a: the fault breaks it too while it lasts"]


def test_no_model_to_break_is_incomplete_naming_what_is_missing():
    from pytest_triton_ready.faults.recording import fault_model

    check = _recorder()
    with pytest.raises(pytest.skip.Exception):
        fault_model(FakeFaults(streaming="generate"), check, streaming=False)
    assert check.result.reason == ("no model to run the fault experiment on: no READY stateless model in scope "
                                   "(sequence models are left alone)")
    check = _recorder()
    with pytest.raises(pytest.skip.Exception):
        fault_model(FakeFaults(model="gone"), check)
    assert check.result.reason == "no model to run the fault experiment on: faults.model='gone' is not READY"


def test_a_declared_command_that_failed_leaves_nothing_to_judge():
    from pytest_triton_ready.faults.outcomes import Outcome
    from pytest_triton_ready.faults.recording import recorded_and_judgeable

    assert recorded_and_judgeable(FakeFaults(), _recorder(), Outcome("x", "m")) is True
    assert recorded_and_judgeable(FakeFaults(), _recorder(), Outcome("x", "m", action_error="exit 1")) is False


# -- server restarts that did not happen (a restart never observed never passes) ---------------------
class RestartInjector(Injector):
    """The fake injector for a whole-server restart; `http_url` is where the server answers."""

    def __init__(self, traffic, http_url):
        from types import SimpleNamespace

        super().__init__(traffic)
        self.target.endpoints = SimpleNamespace(http_url=http_url, grpc_url="127.0.0.1:9", metrics_url="http://127.0.0.1:9")
        self.probe.reference = None
        self.policy = SimpleNamespace(exit_timeout_s=1.0)

    def new_client(self, timeout_s):
        from types import SimpleNamespace

        return SimpleNamespace(close=lambda: None)

    def kill_server(self):
        self.signals.append("SIGKILL")  # a kill that did not take: nothing changes

    def start_server(self):
        self.signals.append("start")


@pytest.fixture
def answering_url():
    """A real HTTP server answering 200 on every path, as a server the kill did not reach."""
    with serving() as url:
        yield url


def _no_op_restart(kind, injector):
    from pytest_triton_ready.fault_declarations import DeclaredFault
    from pytest_triton_ready.faults.crash_experiments import ServerRestart
    from pytest_triton_ready.faults.declared_experiments import DeclaredServerRestart

    if kind == "launched":
        experiment = ServerRestart(injector, "scale")
    else:
        experiment = DeclaredServerRestart(injector, "scale", DeclaredFault.model_validate({"action": {"run": "true"}}))
    experiment.down_wait_s = 0.3
    return experiment


@pytest.mark.parametrize("kind", ["launched", "declared"])
def test_a_server_restart_that_leaves_the_server_answering_is_incomplete_never_a_pass(kind, answering_url):
    injector = RestartInjector(Traffic(), answering_url)
    outcome = run_experiment(_no_op_restart(kind, injector))
    assert outcome.down_s is None
    assert outcome.incomplete.startswith("no restart was observed: the server's URL kept answering for 0.3 s after the ")
    assert outcome.incomplete.endswith("so the time to recover was not measured")


@pytest.mark.parametrize("kind", ["launched", "declared"])
def test_a_server_restart_whose_server_stopped_answering_is_judged(kind):
    injector = RestartInjector(Traffic(), "http://127.0.0.1:9")  # nothing listens: the server is down
    outcome = run_experiment(_no_op_restart(kind, injector))
    assert outcome.down_s is not None and outcome.incomplete is None


def test_a_declared_restart_whose_command_failed_fails_on_the_command_not_incomplete(answering_url):
    from pytest_triton_ready.fault_declarations import DeclaredFault
    from pytest_triton_ready.faults.declared_experiments import DeclaredServerRestart

    injector = RestartInjector(Traffic(), answering_url)
    failing = DeclaredFault.model_validate({"action": {"run": "echo no such pod >&2; exit 4"}})
    outcome = run_experiment(DeclaredServerRestart(injector, "scale", failing))
    assert outcome.incomplete is None and "exited with code 4" in outcome.action_error
