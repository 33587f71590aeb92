"""Unit tests of instance health across a run, no server: error classification, the first
sighting of each error (warm-up included), timeout accounting of requests outstanding past the
request timeout, stall detection, and LoadHealth's findings, record and recovery with fake
probes."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from default_settings import default_settings

from pytest_triton_ready.facts import DeadInstances, Facts
from pytest_triton_ready.health import LoadHealth
from pytest_triton_ready.load import errors
from pytest_triton_ready.load.stalls import find_stalls
from pytest_triton_ready.load.stats import Stats
from pytest_triton_ready.load.traffic import Traffic, TrafficPlan
from pytest_triton_ready.load.window_recorder import Recorder
from pytest_triton_ready.record.model import Result
from pytest_triton_ready.record.recorder import CheckRecorder

DEAD = "INTERNAL: Stub process 'mortal_0_0' is not healthy."


# -- classification ------------------------------------------------------------------------------
@pytest.mark.parametrize(("reason", "kind"), [
    (DEAD, errors.DEAD_INSTANCE),
    ("HTTP N: Stub process 'scale_0_1' is not healthy.", errors.DEAD_INSTANCE),
    ("UNAVAILABLE: failed to connect to all addresses; last error: UNKNOWN: ipv4:N.N.N.N:N: Connection refused",
     errors.UNAVAILABLE),
    ("UNAVAILABLE: Socket closed", errors.UNAVAILABLE),
    ("ClientConnectorError: Cannot connect to host N.N.N.N:N", errors.UNAVAILABLE),
    ("DEADLINE_EXCEEDED: Deadline Exceeded", errors.TIMEOUT),
    ("timeout", errors.TIMEOUT),
    ("timeout: no answer within N s", errors.TIMEOUT),
    ("NOT_FOUND: Request for unknown model: 'scale' has no available versions", errors.NOT_FOUND),
    ("RESOURCE_EXHAUSTED: Exceeds maximum queue size", errors.OVERLOADED),
    ("HTTP N: out of memory", errors.MODEL_ERROR),
    ("INTERNAL: flaky: injected failure N, N.N s after the onset", errors.MODEL_ERROR),
    ("client error: RuntimeError: boom", errors.CLIENT),
])
def test_error_reasons_are_classified(reason, kind):
    assert errors.classify(reason) == kind


def test_a_healthy_error_mix_names_no_dead_instance():
    mix = {"UNAVAILABLE: Connection refused": 3, "NOT_FOUND: Request for unknown model: 'scale' has no available "
           "versions": 2, "DEADLINE_EXCEEDED: Deadline Exceeded": 1, "INTERNAL: model raised ValueError": 1}
    summary = errors.summarize_errors(mix)
    assert not summary.instance_died and summary.dead == {}
    assert summary.count(errors.UNAVAILABLE) == 3 and summary.count(errors.NOT_FOUND) == 2
    assert summary.total == 7
    assert errors.dead_instances(mix) == {}


def test_dead_instances_are_named_with_their_failed_requests():
    found = errors.dead_instances({DEAD: 3, "INTERNAL: Stub process 'mortal_0_1' is not healthy.": 1,
                                   "UNAVAILABLE: Socket closed": 9})
    assert found == {"mortal_0_0": 3, "mortal_0_1": 1}


def test_stub_exits_are_found_in_a_server_log():
    log = "\n".join([
        'I1130 21:53:26.938215 6555 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: mortal_0_0 (CPU device 0)"',
        "E1130 21:54:00.000000 6555 python_be.cc:1] \"Stub process 'mortal_0_0' is not healthy.\"",
        "E1130 21:54:00.100000 6555 python_be.cc:1] \"Stub process 'mortal_0_0' is not healthy.\"",
        "E1130 21:54:01.000000 6555 stub_launcher.cc:1] \"Stub process for model instance 'scale_0_1' exited unexpectedly\"",
    ])
    found = errors.stub_exits_in_log(log)
    assert [i for i, _ in found] == ["mortal_0_0", "scale_0_1"]
    assert errors.stub_exits_in_log('I1130 "successfully loaded \'mortal\'"') == []


# -- the first sighting of an error ----------------------------------------------------------------
def test_a_sighting_records_when_and_after_how_many_requests_warm_up_included():
    recorder = Recorder(["m"], start=100.0, warmup_s=1.0, window_s=None, timeline=None)
    for t in (100.1, 100.2, 100.3):
        recorder.ok("m", t, 0.01)
    recorder.error("m", 100.5, DEAD)  # during warm-up: not in the stats, but seen
    recorder.ok("m", 101.2, 0.01)
    recorder.error("m", 101.5, DEAD)
    seen = recorder.sightings["m"][DEAD]
    assert seen.t_s == pytest.approx(0.5) and seen.completed_before == 3 and seen.count == 2
    # `now` here is a made-up monotonic time (100.5 s): the wall clock of that moment lies as far
    # back as the machine's monotonic clock is ahead of it
    assert seen.wall == pytest.approx(time.time() - (time.monotonic() - 100.5), abs=5)
    assert recorder.overall["m"].errors == {DEAD: 1}


# -- timeouts: outstanding past the request timeout count as failed ----------------------------------
class _Pool:
    model = "m"
    requests = [None] * 4

    def take(self, i):
        return None


class _HangingSender:
    """Answers in 1 ms until `hang_after_s`, then never answers."""

    def __init__(self, hang_after_s):
        self.started = time.monotonic()
        self.hang_after_s = hang_after_s

    async def send(self, pool, request, counter=0):
        if time.monotonic() - self.started >= self.hang_after_s:
            await asyncio.sleep(3600)
        await asyncio.sleep(0.001)
        return None

    async def close(self):
        pass


def _run(plan, sender):
    return asyncio.run(Traffic(plan, sender).run())


def test_requests_outstanding_past_the_timeout_count_as_failed_not_missing():
    plan = TrafficPlan({"m": _Pool()}, "closed", concurrency={"m": 4}, window_s=0.2, bin_s=None, duration_s=1.0,
                       request_timeout_s=0.3)
    result = _run(plan, _HangingSender(0.3))
    reason = "timeout: no answer within 0.3 s"
    assert result.timed_out == 4  # each closed-loop sender hangs once, at about 0.3 s
    assert result.stats.errors == {reason: 4}
    assert result.in_flight_at_stop == 0  # counted as failed, so not left over as missing
    assert result.stats.success_rate < 1.0
    assert sum(w.stats.errors.get(reason, 0) for w in result.windows) == 4  # in the windows where they timed out
    assert errors.classify(reason) == errors.TIMEOUT


def test_requests_younger_than_the_timeout_at_the_stop_stay_in_flight():
    plan = TrafficPlan({"m": _Pool()}, "closed", concurrency={"m": 3}, window_s=0.2, bin_s=None, duration_s=0.6,
                       request_timeout_s=5.0)
    result = _run(plan, _HangingSender(0.3))
    assert result.timed_out == 0 and result.stats.count_errors == 0
    assert result.in_flight_at_stop == 3


# -- stalls -------------------------------------------------------------------------------------
def _window(index, completed, errors_=0):
    stats = Stats(completed - errors_, {"x": errors_} if errors_ else {}, 0, 1.0, float(completed), {"p99": 1.0})
    return SimpleNamespace(index=index, start_s=float(index), end_s=index + 1.0, stats=stats)


def test_a_window_with_far_fewer_completions_than_its_neighbours_is_a_stall():
    windows = [_window(i, n) for i, n in enumerate([100, 104, 12, 98, 101])]
    stalls = find_stalls(windows, 0.25, min_s=0.5)
    assert [s.index for s in stalls] == [2]  # 0.9 s of a 1 s window withheld
    assert "completed 12 requests" in stalls[0].describe()


def _short_window(index, completed_):
    return SimpleNamespace(index=index, start_s=index * 0.4, end_s=(index + 1) * 0.4,
                           stats=Stats(completed_, {}, 0, 1.0, completed_ / 0.4, {"p99": 1.0}))


def test_one_short_window_of_a_busy_client_is_no_stall_but_a_run_of_them_is():
    # recorded on a 2-core machine under other work: 0.4 s windows, window 3 completed 43 of ~204
    hiccup = [_short_window(i, n) for i, n in enumerate([198, 210, 204, 43, 207, 201])]
    assert find_stalls(hiccup, 0.25, min_s=0.5) == []  # 0.3 s of traffic withheld
    assert [s.index for s in find_stalls(hiccup, 0.25, min_s=0.0)] == [3]
    frozen = [_short_window(i, n) for i, n in enumerate([198, 210, 204, 0, 0, 207, 201, 205])]
    stalls = find_stalls(frozen, 0.25, min_s=0.5)  # two silent windows withhold 0.8 s
    assert [s.index for s in stalls] == [3, 4]
    assert "0.8 s of traffic withheld" in stalls[0].describe()


def test_ordinary_spread_and_thin_traffic_are_not_stalls():
    assert find_stalls([_window(i, n) for i, n in enumerate([100, 80, 120, 60, 95])], 0.25) == []
    assert find_stalls([_window(i, n) for i, n in enumerate([4, 5, 0, 6])], 0.25) == []  # too few to judge
    assert find_stalls([_window(0, 100), _window(1, 3)], 0.25) == []  # one neighbour is not enough
    errors_only = [_window(i, n, e) for i, (n, e) in enumerate([(100, 0), (100, 100), (100, 0)])]
    assert find_stalls(errors_only, 0.25) == []  # fast errors are completions: a failure, not a stall


# -- LoadHealth ---------------------------------------------------------------------------------
def _check(check_id="PERF-1", test="test_benchmark_meets_slo_at_target_load"):
    result = Result(check_id, "performance", "t", f"checks/test_performance.py::{test}")
    return CheckRecorder(result, default_settings())


class _Client:
    def __init__(self):
        self.calls = []

    def unload(self, model):
        self.calls.append(("unload", model))

    def load(self, model):
        self.calls.append(("load", model))

    def model_ready(self, model):
        return ("load", model) in self.calls

    def model_config(self, model):
        return {"instance_group": [{"count": 2}]}


def _target(owns=True):
    return SimpleNamespace(owns_process=owns, client=_Client(), models=lambda: ["mortal"],
                           server_log=lambda n: "I1130 nothing about stubs")


def _probe(dead=()):
    return SimpleNamespace(unhealthy_instances=list(dead), every_instance_answers=not dead,
                           describe=lambda: f"{16 - len(dead)} of 16 probe requests answered correctly")


def _traffic(sightings, started_at, completed, errors_=None, windows=()):
    stats = Stats(completed, dict(errors_ or {}), 0, 1.0, 100.0, {"p99": 1.0})
    return SimpleNamespace(sightings=sightings, started_at=started_at, completed=completed, stats=stats,
                           windows=list(windows), timed_out=0)


def test_a_dead_instance_fails_the_check_whatever_the_success_rate(monkeypatch):
    facts, check, target = Facts(), _check(), _target(owns=True)
    probes = iter([_probe(["mortal_0_0"]), _probe()])  # after the check: dead; after unload + load: all answer
    monkeypatch.setattr(LoadHealth, "_probe", lambda self, model: (next(probes), None))
    health = LoadHealth(target, check, facts, ["mortal"])
    first = _traffic({}, health.started + 0.1, 5000)
    assert health.observe(first, model="mortal", label="concurrency 1") == []
    seen = SimpleNamespace(t_s=2.5, wall=time.time(), completed_before=1200, count=3)
    second = _traffic({"mortal": {DEAD: seen, "UNAVAILABLE: Socket closed": seen}}, health.started + 10.0, 12000,
                      {DEAD: 3})
    [death] = health.observe(second, model="mortal", label="concurrency 8")
    assert death.instance == "mortal_0_0" and death.requests == 6200 and death.t_s == pytest.approx(12.5)
    health.finish()
    assert check.failed
    [dead] = [f for f in check.errors if "mortal_0_0" in f.message]
    assert dead.message.startswith("mortal: instance mortal_0_0 died during PERF-1 (first failed request 12.5 s "
                                   "into the check")
    assert "concurrency 8, after 6200 requests" in dead.message and "3 requests failed" in dead.message
    assert target.client.calls == [("unload", "mortal"), ("load", "mortal")]
    [recovered] = [f for f in check.result.findings if "had to be recovered" in f.message]
    assert recovered.severity == "warning"
    [record] = facts.require(DeadInstances, model="mortal").deaths
    assert record["instance"] == "mortal_0_0" and record["check"] == "PERF-1" and record["recovered"]
    assert record["requests"] == 6200 and record["source"] == "errors"


def test_the_probe_finds_a_dead_instance_the_traffic_did_not_show(monkeypatch):
    facts, check = Facts(), _check()
    monkeypatch.setattr(LoadHealth, "_probe", lambda self, model: (_probe(["mortal_0_1"]), None))
    health = LoadHealth(_target(owns=False), check, facts, ["mortal"])
    health.observe(_traffic({}, health.started, 100), model="mortal")
    health.finish()
    [dead] = check.errors
    assert "instance mortal_0_1 died during PERF-1 (found by the probe after the check)" in dead.message
    assert not facts.require(DeadInstances, model="mortal").deaths[0]["recovered"]  # attached: nobody may unload it
    assert any("unload and load the model" in r for r in check.result.recommendations)


def test_a_healthy_error_mix_passes_the_health_watch(monkeypatch):
    facts, check = Facts(), _check()
    monkeypatch.setattr(LoadHealth, "_probe", lambda self, model: (_probe(), None))
    health = LoadHealth(_target(), check, facts, ["mortal"])
    seen = SimpleNamespace(t_s=1.0, wall=time.time(), completed_before=10, count=4)
    traffic = _traffic({"mortal": {"UNAVAILABLE: Connection refused": seen}}, health.started, 1000,
                       {"UNAVAILABLE: Connection refused": 4})
    assert health.observe(traffic, model="mortal") == []
    assert health.finish() == []
    assert not check.failed and not facts


def test_a_later_check_says_the_model_lost_an_instance(monkeypatch):
    earlier = {"instance": "mortal_0_0", "check": "PERF-1", "test": "test_benchmark", "recovered": False}
    facts = Facts()
    facts.publish(DeadInstances("mortal", (earlier,)))
    monkeypatch.setattr(LoadHealth, "_probe", lambda self, model: (_probe(["mortal_0_0"]), None))
    check = _check("PERF-2", "test_throughput_latency_curve")
    health = LoadHealth(_target(owns=False), check, facts, ["mortal"])
    assert health.skip("mortal")
    assert "mortal: instance mortal_0_0 has been dead since an earlier check (mortal_0_0 in PERF-1" in \
        check.errors[0].message

    facts.publish(DeadInstances("mortal", ({**earlier, "recovered": True},)))
    check = _check("PERF-3", "test_soak_stability")
    health = LoadHealth(_target(), check, facts, ["mortal"])
    assert not health.skip("mortal") and not check.errors
    assert "recovered by unload + load" in check.result.findings[0].message


def test_soak_windows_say_when_the_instance_died(monkeypatch):
    monkeypatch.setattr(LoadHealth, "_probe", lambda self, model: (_probe(), None))
    check = _check("PERF-3", "test_soak_stability")
    health = LoadHealth(_target(owns=False), check, Facts(), ["mortal"])
    now = time.time()
    windows = [SimpleNamespace(index=i, start_s=float(i), end_s=i + 1.0, wall_time=now + i + 1.0, sent=100,
                               errors={DEAD: 2} if i == 2 else {}) for i in range(4)]
    [death] = health.observe_windows(windows)
    assert death.label == "the soak, window 2" and death.requests == 200 and death.failed_requests == 2


def test_an_instance_probe_that_cannot_run_leaves_the_rule_unjudged_not_a_warning(monkeypatch):
    """Issue 23 g: a probe exception is not a warning the check passes over: the dead-instance rule
    was not judged, so the check ends INCOMPLETE naming the probe (unless another rule failed)."""
    from pytest_triton_ready.faults import probes

    class Broken:
        def __init__(self, *args, **kwargs):
            raise ConnectionError("connection refused")

    monkeypatch.setattr(probes, "InstanceProber", Broken)
    facts, check = Facts(), _check()
    health = LoadHealth(_target(owns=False), check, facts, ["mortal"])
    assert health.finish() == []
    assert check.unmeasured == ["mortal: every instance answers the instance probe"]
    assert not [f for f in check.result.findings if f.severity == "warning"]
    [evidence] = [e for e in check.result.evidence if "could not run" in e.label]
    assert evidence.text == "ConnectionError: connection refused"


def test_every_model_is_probed_at_the_same_time_not_one_span_after_another(monkeypatch):
    """Each probe is a span of real requests (health_probe_span_s): probed one after another, every
    model in scope added that span to every load check."""
    import threading

    running, most = [0], [0]
    lock = threading.Lock()
    everyone = threading.Barrier(3, timeout=5)  # only passes once all three probes run at once

    def probe(self, model):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        everyone.wait()
        with lock:
            running[0] -= 1
        return _probe(), None

    monkeypatch.setattr(LoadHealth, "_probe", probe)
    health = LoadHealth(_target(), _check(), Facts(), ["a", "b", "c"])
    assert health.finish() == [] and most[0] == 3
