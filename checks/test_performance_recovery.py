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

from pytest_triton_ready.faults.recording import record_outcome, seconds
from pytest_triton_ready.load.errors import dead_instances
from pytest_triton_ready.models import defer_to_streaming

pytestmark = pytest.mark.usefixtures("triton")


def _fault_model(faults, check, streaming: bool = True) -> str:
    """The model to break: a stateless unary one; where there is none, a decoupled one under
    streamed traffic (`streaming`), else INCOMPLETE naming what is missing."""
    model = faults.choose_model()
    if model is None and streaming:
        model = faults.choose_streaming_model()
    if model is None:
        wanted = f"faults.model={faults.plan.model!r} is not READY" if faults.plan.model else \
            "no READY stateless model in scope (sequence models are left alone)"
        check.incomplete(f"no model to run the fault experiment on: {wanted}")
    pipelines = faults.pipeline_steps().get(model)
    if pipelines:
        check.finding(f"{model} is a step of {', '.join(pipelines)}: the fault breaks "
                      f"{'them' if len(pipelines) > 1 else 'it'} too while it lasts", severity="warning", model=model)
    return model


def _publish(facts: dict, key: str, outcome, check, recovery_s) -> None:
    facts[key] = {"passed": outcome.incomplete is None and not check.failed,
                  "failed_requests": outcome.failed_requests, "recovery_s": recovery_s,
                  "model": outcome.model, "incomplete": outcome.incomplete}


def _check_reload(outcome, check, triton_settings, what: str, rate_per_s: float) -> None:
    model = outcome.model
    for instance, failed in dead_instances(outcome.errors_by_reason).items():
        # Nothing was killed here: an instance that died under the reload's traffic is a finding of its own.
        check.finding(f"{model}: instance {instance} died during the {what} ({failed} requests failed with "
                      f"\"Stub process '{instance}' is not healthy.\")", model=model, rule="HEALTH")
    check.measure(f"failed requests during the {what}", outcome.failed_requests, "requests", model=model,
                  threshold=check.threshold("reload_failed_requests_max"),
                  finding=f"{model}: {outcome.failed_requests} requests failed during the {what} under "
                          f"{rate_per_s:g} requests/s: it is not zero-downtime")
    check.measure(f"{what}: load request duration", seconds(outcome.reload_call_s), "s", model=model)
    serving = check.measure(f"time until the {'new version' if outcome.new_version else 'reloaded model'} serves",
                            seconds(outcome.serve_s), "s", model=model,
                            threshold=check.threshold("reload_serve_max_s"))
    if outcome.serve_s is None:
        check.finding(f"{model}: the {what} never served within the recovery timeout", model=model)
    elif not serving:
        check.recommend("A slow load delays every rollout: look at the model's initialize() and warm-up.")
    if outcome.peak_p99_ms is not None:
        check.measure(f"peak p99 latency of a 100 ms bin after the {what} started", round(outcome.peak_p99_ms, 3),
                      "ms", model=model)
    if outcome.failed_requests:
        check.recommend("Roll out with a load of a changed model (Triton serves the old version until the new one "
                        "is ready), never with unload + load; keep enough instances for the old and new copies.")


@pytest.mark.triton_check("PERF-4")
def test_forced_reload_under_traffic_loses_no_request(faults, check, triton_settings, triton_facts):
    """A forced model reload under traffic fails no request and serves within reload_serve_max_s.

    The reload is a load with the effective config plus a harmless parameter (a load of an
    unchanged model is a no-op); failed requests are compared with reload_failed_requests_max. On
    a decoupled model (where no stateless unary model is in scope) the traffic is streamed: a stream
    cut off or left without its final response is a failed request."""
    model = _fault_model(faults, check)
    outcome = faults.forced_reload(model)
    record_outcome(check, outcome, faults.plan.rate_per_s)
    if outcome.incomplete:
        _publish(triton_facts, "faults.hot_reload", outcome, check, None)
        check.incomplete(outcome.incomplete)
    _check_reload(outcome, check, triton_settings, "forced reload", faults.plan.rate_per_s)
    _publish(triton_facts, "faults.hot_reload", outcome, check, seconds(outcome.serve_s))


@pytest.mark.triton_check("PERF-4")
def test_new_version_rollout_under_traffic_loses_no_request(faults, check, triton_settings, triton_facts):
    """Rolling out version N+1 under traffic fails no request and N+1 serves within reload_serve_max_s.

    Version N+1 (a new version directory) appears in a scratch copy of the model served by a second
    server like the run's one, then a load picks it up; the repository under test is not touched.
    On a decoupled model (where no stateless unary model is in scope) traffic and probes are streamed."""
    model = _fault_model(faults, check)
    outcome = faults.version_rollout(model)
    record_outcome(check, outcome, faults.plan.rate_per_s)
    if outcome.incomplete:
        _publish(triton_facts, "faults.version_rollout", outcome, check, None)
        check.incomplete(outcome.incomplete)
    if outcome.action_error:
        _publish(triton_facts, "faults.version_rollout", outcome, check, None)
        return  # the declared command failed: an error finding with its output, nothing to judge
    _check_reload(outcome, check, triton_settings, f"rollout of version {outcome.new_version}",
                  faults.plan.rate_per_s)
    check.measure(f"state of version {outcome.old_version} after the rollout", outcome.old_version_state, model=model)
    _publish(triton_facts, "faults.version_rollout", outcome, check, seconds(outcome.serve_s))


@pytest.mark.triton_check("PERF-4")
def test_dead_instance_is_reported_and_recovers(faults, check, triton_settings, triton):
    """A dead model instance shows on the ready endpoints, and unload + load revives every instance.

    One python backend stub is killed under traffic; /v2/health/ready and /v2/models/M/ready must
    stop answering 200, and after unload + load every instance must answer a probe within
    instance_recovery_max_s. Where every READY model in scope is decoupled, NOT APPLICABLE:
    test_streaming_dead_stub_is_reported_and_recovers covers a dead stub under streams."""
    defer_to_streaming(check, triton, "test_streaming_dead_stub_is_reported_and_recovers (PERF-4)",
                       "kills a python stub under streams, checks the streams end and the ready endpoints, "
                       "and recovers it with unload + load")
    model = _fault_model(faults, check, streaming=False)
    outcome = faults.instance_restart(model)
    record_outcome(check, outcome, faults.plan.rate_per_s)
    if outcome.incomplete:
        check.incomplete(outcome.incomplete)
    if outcome.action_error:
        return  # the declared command failed: an error finding with its output, nothing to judge
    dead = outcome.instance
    check.measure("requests failed while the instance was dead", outcome.failed_while_dead, "requests", model=model)
    check.measure("requests failed during unload + load", outcome.failed_during_recovery, "requests", model=model)
    if outcome.failure_share is not None:
        check.measure(f"share of requests failing while 1 of {outcome.instances} instances was dead",
                      round(outcome.failure_share, 4), "ratio", model=model)
    check.evidence("probe of every instance while it was dead", outcome.probe_while_dead or "")
    check.measure("/v2/health/ready while the instance was dead", _statuses(outcome.server_ready_while_dead), model=model)
    check.measure(f"/v2/models/{model}/ready while the instance was dead", _statuses(outcome.model_ready_while_dead),
                  model=model)
    if outcome.readiness_lied:
        version = (triton.client.server_metadata() or {}).get("version", "?")
        check.finding(f"{model}: instance {dead} was dead and requests routed to it failed, yet /v2/health/ready "
                      f"answered {_statuses(outcome.server_ready_while_dead)} and /v2/models/{model}/ready answered "
                      f"{_statuses(outcome.model_ready_while_dead)}: the ready endpoints hide a dead instance "
                      f"(Triton {version}; model readiness reflects it from 25.12, strict server readiness from 26.04)",
                      model=model, rule="PERF-4")
        check.recommend("Do not trust the ready endpoints alone: probe with real inferences that reach every "
                        "instance (several concurrent requests per instance), alert on "
                        "nv_inference_request_failure, and recover a model whose stub died with unload + load.")
    if outcome.restarted_by_server is False:
        check.finding(f"{model}: Triton did not restart the dead stub of {dead} by itself", severity="warning",
                      model=model)
    if outcome.plain_load_recovered is False:
        check.finding(f"{model}: a plain load of the unchanged model did not recover it (a no-op); unload + load "
                      "(or a load with a changed config) is needed", severity="info", model=model)
    if outcome.failed_during_recovery:
        check.finding(f"{model}: the recovery by unload + load failed {outcome.failed_during_recovery} requests: "
                      "the model is unavailable between the unload and the end of the load", severity="warning",
                      model=model)
        check.recommend("Run two or more replicas behind the load balancer, so that recovering one model on one "
                        "replica is not an outage; a load with a changed config also replaces every instance "
                        "and keeps the model loaded meanwhile (see the forced reload check).")
    check.measure("time from unload + load until every instance answers", seconds(outcome.recovery_s), "s",
                  model=model, threshold=check.threshold("instance_recovery_max_s"))
    if outcome.recovery_s is None:
        check.finding(f"{model}: not every instance answered within {faults.plan.recovery_timeout_s:g} s of "
                      "unload + load", model=model)
    check.measure("time from the kill until clients saw clean service again", seconds(outcome.impact_s), "s",
                  model=model)


@pytest.mark.triton_check("PERF-4")
def test_server_crash_restart_answers_correctly(faults, check, triton_settings):
    """After a crash (SIGKILL) and restart the server answers correctly within server_restart_max_s.

    The launcher starts it again on the same ports; the first correct answer is the same output
    for the same input as before the crash, and no process of the crashed server may be left. On a
    decoupled model (where no stateless unary model is in scope) traffic and probes are streamed:
    the first correct answer is the same tokens for the same prompt as before the crash."""
    model = _fault_model(faults, check)
    outcome = faults.server_restart(model)
    record_outcome(check, outcome, faults.plan.rate_per_s)
    if outcome.incomplete:
        check.incomplete(outcome.incomplete)
    if outcome.action_error:
        return  # the declared command failed: an error finding with its output, nothing to judge
    _left_behind(check, outcome.left_behind, "killed")
    check.measure("time from SIGKILL until live", seconds(outcome.live_s), "s")
    check.measure("time from SIGKILL until ready", seconds(outcome.ready_s), "s")
    check.measure("time from SIGKILL until the first correct inference", seconds(outcome.first_inference_s), "s",
                  model=model, threshold=check.threshold("server_restart_max_s"))
    if outcome.first_inference_s is None:
        check.finding(f"{model}: no correct inference within {faults.plan.recovery_timeout_s:g} s of the restart",
                      model=model)
    check.measure("requests failed during the outage", outcome.failed_requests, "requests", model=model)
    check.measure("time from SIGKILL until the traffic's own requests succeeded again",
                  seconds(outcome.client_recovery_s), "s", model=model)
    lag = (outcome.client_recovery_s - outcome.first_inference_s
           if outcome.client_recovery_s is not None and outcome.first_inference_s is not None else None)
    if lag is not None and lag > 1.0:
        check.finding(f"clients on a long-lived {faults.plan.protocol} connection resumed {lag:.1f} s after the "
                      "server answered again (reconnect backoff): the outage they see is longer than the "
                      "server's", severity="warning", model=model)
        check.recommend("Bound the clients' reconnect backoff (gRPC: grpc.initial_reconnect_backoff_ms and "
                        "grpc.max_reconnect_backoff_ms) or let the load balancer retry on another replica.")


@pytest.mark.triton_check("PERF-4")
def test_sigterm_under_traffic_is_graceful(faults, check, triton_settings, triton):
    """SIGTERM under traffic drops readiness first, loses no request, and the server exits in time.

    Readiness must stop answering 200 within shutdown_ready_drop_max_s and before the exit; requests
    taken must complete and the rest be refused cleanly (shutdown_lost_requests_max); the process
    must exit by itself, code 0, within its exit timeout, leaving nothing behind. Where every READY
    model in scope is decoupled, NOT APPLICABLE: test_streaming_sigterm_ends_streams_cleanly covers
    SIGTERM with streams in flight."""
    defer_to_streaming(check, triton, "test_streaming_sigterm_ends_streams_cleanly (PERF-4)",
                       "sends SIGTERM with streams in flight and checks every one ends with its final response "
                       "and the server exits 0")
    model = _fault_model(faults, check, streaming=False)
    outcome = faults.graceful_shutdown(model)
    record_outcome(check, outcome, faults.plan.rate_per_s)
    if outcome.incomplete:
        check.incomplete(outcome.incomplete)
    if outcome.action_error:
        return  # the declared command failed: an error finding with its output, nothing to judge
    check.measure("requests in flight at SIGTERM", outcome.in_flight_at_sigterm, "requests")
    check.measure("requests lost (taken, then failed or cut without an answer)", outcome.lost_requests, "requests",
                  threshold=check.threshold("shutdown_lost_requests_max"),
                  finding=f"{outcome.lost_requests} requests were lost during the shutdown: "
                          + "; ".join(f"{n} x {r}" for r, n in outcome.lost.items()))
    check.measure("requests refused cleanly after SIGTERM", sum(outcome.refused.values()), "requests")
    check.measure("time from SIGTERM until readiness stopped answering 200", seconds(outcome.ready_drop_s), "s",
                  threshold=check.threshold("shutdown_ready_drop_max_s"))
    check.measure("time from SIGTERM until the process exited", seconds(outcome.exit_s), "s",
                  threshold=outcome.exit_timeout_s, comparison="<=",
                  finding=f"the server did not exit within its exit timeout ({outcome.exit_timeout_s:g} s)")
    if outcome.exit_s is None:
        check.finding(f"the server had not exited {outcome.exit_timeout_s + 10:g} s after SIGTERM")
    elif outcome.ready_drop_s is None or outcome.ready_drop_s > outcome.exit_s:
        check.finding("readiness did not drop before the process exited: a load balancer kept sending to a "
                      "server that was going away")
    if outcome.shutdown_log:
        check.evidence("server log from SIGTERM to the exit", outcome.shutdown_log)
    if outcome.exit_code is None and outcome.declared_by and outcome.exit_s is not None:
        check.incomplete("the exit code of a server this run does not own is not visible from here: declare "
                         "attach.fault_actions.sigterm.probe printing it as its last line (e.g. `docker inspect -f "
                         "'{{.State.ExitCode}}' triton`), see docs/faults.md")
    check.measure("exit code", outcome.exit_code, threshold=0, comparison="==",
                  finding=f"the server exited with code {outcome.exit_code} after SIGTERM, not 0: it did not stop "
                          "cleanly (see the server log)")
    if outcome.held_by_connections:
        check.finding("open HTTP connections held the server after SIGTERM (\"Found N HTTP service connections\"): "
                      "Triton waits for them, up to its exit timeout, before it stops the models", severity="warning")
        check.recommend("Keep --exit-timeout-secs below the orchestrator's grace period, and make clients and "
                        "proxies close idle keep-alive connections once readiness drops.")
    _left_behind(check, outcome.left_behind, "stopped")
    unknown_model = {r: n for r, n in outcome.refused.items() if "no available versions" in r}
    if unknown_model:
        check.finding(f"while shutting down, the server answered {sum(unknown_model.values())} requests with "
                      f"\"{next(iter(unknown_model))}\" instead of UNAVAILABLE: a client retry policy that retries "
                      "only UNAVAILABLE will not retry them on another replica", severity="warning", model=model)
        check.recommend("Take the replica out of the load balancer before SIGTERM (a preStop hook that waits "
                        "for readiness to be noticed), and let clients retry NOT_FOUND during rollouts.")
    if outcome.restart_s is not None:
        check.measure("time to start the server again after the shutdown", seconds(outcome.restart_s), "s")


def _left_behind(check, pids: list[int] | None, how: str) -> None:
    if pids is None:
        check.finding(f"processes of the {how} server could not be checked: they are not visible from this host "
                      "with this launcher", severity="info")
        return
    check.measure(f"processes of the {how} server left behind", len(pids), "processes", threshold=0, comparison="<=",
                  finding=f"processes of the {how} server still run: pids {pids}")


def _statuses(statuses: list[int]) -> str:
    seen = sorted({str(s) if s is not None else "no answer" for s in statuses})
    return "/".join(seen) if seen else "not polled"
