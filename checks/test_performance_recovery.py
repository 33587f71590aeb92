"""Phase "performance", PERF-4: fault recovery. Each check is an experiment under open-loop
traffic: a steady state, a fault, a verdict with a timeline (events, and per 100 ms successes,
errors and p99 latency).

On a server this run launched every experiment runs with the launcher's built-in faults. On an
attached server nothing runs unless the settings allow it: the forced reload needs
`attach.allow: [reload]`; the destructive experiments (a dead instance, a crash, SIGTERM, a new
version) need `faults` allowed and a declared fault action (`attach.fault_actions`: the commands
that cause the fault in this deployment) and are INCOMPLETE otherwise, naming what is missing.
Each of them leaves the server ready, every instance answering, for the checks after it (the
restore runs in a `finally`). Durations and rate: the YAML section `faults:` (docs/faults.md).

Where every READY model in scope is decoupled (streaming), the forced reload, the rollout and the
crash + restart run on a decoupled model with streamed traffic and streamed probes; a dead
instance and SIGTERM are NOT APPLICABLE there: checks/test_streaming.py has them for streams.
"""

import pytest

from pytest_triton_ready.facts import HotReload, VersionRollout
from pytest_triton_ready.faults.judges import judge_dead_instance, judge_reload, judge_server_restart, judge_sigterm
from pytest_triton_ready.faults.recording import (
    fault_model,
    publish_outcome,
    publish_start_and_drain,
    record_outcome,
    recorded_and_judgeable,
    seconds,
)
from pytest_triton_ready.server.models import defer_to_streaming

pytestmark = pytest.mark.usefixtures("triton")


@pytest.mark.triton_check("PERF-4")
def test_forced_reload_under_traffic_loses_no_request(faults, check, triton_settings, triton_facts):
    """A forced model reload under traffic fails no request and serves within reload_serve_max_s.

    The reload is a load with the effective config plus a harmless parameter (a load of an
    unchanged model is a no-op); failed requests are compared with reload_failed_requests_max. On
    a decoupled model (where no stateless unary model is in scope) the traffic is streamed: a stream
    cut off or left without its final response is a failed request."""
    model = fault_model(faults, check)
    outcome = faults.forced_reload(model)
    record_outcome(check, outcome, faults.plan.rate_per_s)
    if outcome.incomplete:
        publish_outcome(triton_facts, HotReload, outcome, check, None)
        check.incomplete(outcome.incomplete)
    judge_reload(check, outcome, "forced reload", faults.plan.rate_per_s)
    publish_outcome(triton_facts, HotReload, outcome, check, seconds(outcome.serve_s))


@pytest.mark.triton_check("PERF-4")
def test_new_version_rollout_under_traffic_loses_no_request(faults, check, triton_settings, triton_facts):
    """Rolling out version N+1 under traffic fails no request and N+1 serves within reload_serve_max_s.

    Version N+1 (a new version directory) appears in a scratch copy of the model served by a second
    server like the run's one, then a load picks it up; the repository under test is not touched.
    On a decoupled model (where no stateless unary model is in scope) traffic and probes are streamed."""
    model = fault_model(faults, check)
    outcome = faults.version_rollout(model)
    record_outcome(check, outcome, faults.plan.rate_per_s)
    if outcome.incomplete:
        publish_outcome(triton_facts, VersionRollout, outcome, check, None)
        check.incomplete(outcome.incomplete)
    if outcome.action_error:
        publish_outcome(triton_facts, VersionRollout, outcome, check, None)
        return  # the declared command failed: an error finding with its output, nothing to judge
    judge_reload(check, outcome, f"rollout of version {outcome.new_version}", faults.plan.rate_per_s)
    check.measure(f"state of version {outcome.old_version} after the rollout", outcome.old_version_state, model=model)
    publish_outcome(triton_facts, VersionRollout, outcome, check, seconds(outcome.serve_s))


@pytest.mark.triton_check("PERF-4")
def test_dead_instance_is_reported_and_recovers(faults, check, triton_settings, triton):
    """A dead model instance shows on the ready endpoints, and unload + load revives every instance.

    One python backend stub is killed under traffic; /v2/health/ready and /v2/models/M/ready must
    stop answering 200, and after unload + load every instance must answer a probe within
    instance_recovery_max_s. A kill that did not take (no request failed, every instance answered
    the probe) is INCOMPLETE. Where every READY model in scope is decoupled, NOT APPLICABLE:
    test_streaming_dead_stub_is_reported_and_recovers covers a dead stub under streams."""
    defer_to_streaming(check, triton)
    model = fault_model(faults, check, streaming=False)
    outcome = faults.instance_restart(model)
    if recorded_and_judgeable(faults, check, outcome):
        version = (triton.client.server_metadata() or {}).get("version", "?")
        judge_dead_instance(check, outcome, version, faults.plan.recovery_timeout_s)


@pytest.mark.triton_check("PERF-4")
def test_server_crash_restart_answers_correctly(faults, check, triton_settings, triton_facts):
    """After a crash (SIGKILL) and restart the server answers correctly within server_restart_max_s.

    The launcher starts it again on the same ports; the first correct answer is the same output
    for the same input as before the crash, and no process of the crashed server may be left. On a
    decoupled model (where no stateless unary model is in scope) traffic and probes are streamed:
    the first correct answer is the same tokens for the same prompt as before the crash."""
    outcome = faults.server_restart(fault_model(faults, check))
    publish_start_and_drain(triton_facts, outcome)
    if recorded_and_judgeable(faults, check, outcome):
        judge_server_restart(check, outcome, faults.plan.recovery_timeout_s, faults.plan.protocol)


@pytest.mark.triton_check("PERF-4")
def test_sigterm_under_traffic_is_graceful(faults, check, triton_settings, triton, triton_facts):
    """SIGTERM under traffic drops readiness first, loses no request, and the server exits in time.

    Readiness must stop answering 200 within shutdown_ready_drop_max_s and before the exit; requests
    taken must complete and the rest be refused cleanly (shutdown_lost_requests_max); the process
    must exit by itself, code 0, within its exit timeout, leaving nothing behind. The signal is sent
    once a request is in flight; nothing in flight at it is INCOMPLETE. Where every READY
    model in scope is decoupled, NOT APPLICABLE: test_streaming_sigterm_ends_streams_cleanly covers
    SIGTERM with streams in flight."""
    defer_to_streaming(check, triton)
    outcome = faults.graceful_shutdown(fault_model(faults, check, streaming=False))
    publish_start_and_drain(triton_facts, outcome)
    if recorded_and_judgeable(faults, check, outcome):
        judge_sigterm(check, outcome)
