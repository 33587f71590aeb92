"""Streamed load under the same guards as unary load (load/streaming/run.py, policy.guard_traffic):
the attach ceiling and the saturate permission, the run budget given explicitly, the warm-up
thresholds, the run plan's streaming lines, and the traffic runners' shared Protocol."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_triton_ready.budget import Deadline, RunBudget
from pytest_triton_ready.load.background import BackgroundTraffic
from pytest_triton_ready.load.runner import TrafficRunner, TrafficView
from pytest_triton_ready.load.streaming.requests import StreamingPlan
from pytest_triton_ready.load.streaming.run import StreamingRun
from pytest_triton_ready.load.streaming.traffic import StreamingLoad
from pytest_triton_ready.policy import Policy, plan_block
from pytest_triton_ready.settings import build_settings
from tests.default_settings import default_settings

STAGING = "https://triton.staging.example:8000"


def _policy(allowed: frozenset[str] = frozenset()) -> Policy:
    return Policy(True, frozenset(), STAGING, allowed, 8, 50.0, 1.0, 30.0, {})


def _run(allowed: frozenset[str] = frozenset(), run_budget: RunBudget | None = None) -> StreamingRun:
    triton = SimpleNamespace(endpoints=SimpleNamespace(grpc_url="localhost:1"), settings=SimpleNamespace(headers={}),
                             client=SimpleNamespace(changes=0))
    return StreamingRun(triton, default_settings(), _policy(allowed), run_budget, "PERF-2" if run_budget else "")



def _plan() -> StreamingPlan:
    return StreamingPlan("streamer", "PROMPT", None, "TOKEN", [], False)


def test_streams_above_the_attach_ceiling_do_not_start_and_name_the_switch():
    with pytest.raises(pytest.skip.Exception) as refused:
        _run().load(_plan(), concurrency=16)
    assert "16 requests in flight is above the load ceiling of 8 (attach.max_concurrency)" in str(refused.value)
    assert "--triton-allow=saturate" in str(refused.value)
    with pytest.raises(pytest.skip.Exception, match="attach.max_rate_per_s"):
        _run().load(_plan(), rate=80.0)


def test_streams_at_the_ceiling_or_with_saturate_allowed_are_built():
    assert isinstance(_run().load(_plan(), concurrency=8), StreamingLoad)
    assert _run(frozenset({"saturate"})).load(_plan(), concurrency=16).concurrency == 16


def test_warm_up_reads_the_thresholds_and_is_shorter_for_a_model_already_streamed_to():
    run = _run()
    assert run.warmup_s("streamer") == 1.0  # load_warmup_s
    run.load(_plan(), concurrency=2)
    assert run.warmup_s("streamer") == 0.25  # load_rewarmup_s
    run.triton.client.changes = 1  # a reload: the server changed
    assert run.warmup_s("streamer") == 1.0


def test_the_run_budget_is_given_explicitly_and_a_spent_share_starts_nothing():
    clock = [0.0]
    run_budget = RunBudget(100.0, {"PERF-2": 10.0}, clock=lambda: clock[0])
    run_budget.deadlines["PERF-2"] = Deadline("PERF-2", 6.0, 0.0, clock=lambda: clock[0])
    run = _run(run_budget=run_budget)
    assert run.looks(3.0, parts=1).longest_s == 6.0  # not the 12 s of load_max_windows x load_window_s
    assert _run().looks(3.0, parts=1).longest_s == 12.0
    clock[0] = 7.0
    with pytest.raises(pytest.skip.Exception, match="share of it .* is spent; left out: the measurement of streamer"):
        run.measure(_plan(), [], run.looks(3.0), concurrency=2)


def test_the_attached_plan_lists_every_streaming_action_with_its_streams_and_permission():
    lines = plan_block(build_settings({"triton_url": STAGING}, {}, environ={})).splitlines()
    sweep = next(line for line in lines if "streams: sweep 1, 2, 4 ... 16 streams" in line)
    assert sweep.split()[0] == "PERF-2" and sweep.endswith("NOT RUN, INCOMPLETE (needs saturate)")
    assert any(line.split()[0] == "PERF-1" and "closed loop at 8 streams" in line and "NOT RUN" not in line
               for line in lines)
    assert any(line.split()[0] == "PERF-3" and "soak of 30 s at 8 streams" in line for line in lines)
    assert any("streams: 2 x instances streams" in line for line in lines)
    above = plan_block(build_settings({"triton_url": STAGING}, {}, environ={},
                                      cli_thresholds=["streaming_concurrency=12"]))
    assert "closed loop at 12 streams per decoupled model -> NOT RUN above the ceiling, INCOMPLETE" in above


def test_both_traffic_runners_share_one_protocol():
    streams = StreamingLoad("localhost:1", _plan(), concurrency=1)
    unary = BackgroundTraffic(lambda on_window: None)  # type: ignore[arg-type, return-value]
    for runner in (streams, unary):
        assert isinstance(runner, TrafficRunner) and isinstance(runner, TrafficView)
        assert runner.in_flight == 0 and runner.running is False and runner.elapsed_s() == 0.0


def test_perf5_streaming_repeats_above_the_ceiling_do_not_start():
    from pytest_triton_ready.baseline.noise import streaming_noise
    from pytest_triton_ready.facts import StreamingCapacity

    metadata = {"inputs": [{"name": "PROMPT", "datatype": "BYTES", "shape": [1]},
                           {"name": "MAX_TOKENS", "datatype": "INT32", "shape": [1]}],
                "outputs": [{"name": "TOKEN", "datatype": "BYTES", "shape": [1]}]}
    client = SimpleNamespace(model_metadata=lambda m: metadata, model_config=lambda m: {"max_batch_size": 0})
    triton = SimpleNamespace(client=client, endpoints=SimpleNamespace(grpc_url="localhost:1"),
                             settings=build_settings({"triton_url": STAGING}, {}, environ={}))
    check = SimpleNamespace(threshold=default_settings().threshold, measure=lambda *a, **k: None)
    fact = StreamingCapacity("streamer", 900.0, 30.0, 1, concurrency=16)
    with pytest.raises(pytest.skip.Exception, match="16 requests in flight is above the load ceiling of 8"):
        streaming_noise(triton, check, "streamer", fact)


def test_a_fault_experiments_streams_pass_the_same_ceiling():
    """The streamed traffic of PERF-4's experiments (faults/injector.py, faults/stream_experiments.py)
    is refused above the attach ceiling as every other load is, before any fault."""
    from pytest_triton_ready.faults.injector import FaultInjector
    from pytest_triton_ready.faults.schema import FaultPlan
    from pytest_triton_ready.faults.stream_traffic import users_for

    injector = FaultInjector.__new__(FaultInjector)
    injector.plan = FaultPlan(rate_per_s=80.0)
    injector._policy = _policy()
    injector.is_streaming = lambda model: True
    with pytest.raises(pytest.skip.Exception, match=r"16 requests in flight is above the load ceiling of 8"):
        injector._traffic("streamer")  # 80 requests/s over 16 streams
    assert users_for(40.0) == 8 and users_for(200.0) == 16  # 40/s: 8 streams, within the ceiling of 8
