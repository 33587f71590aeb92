"""PERF-4's rules on the unary fault experiments (reload_experiments.py, crash_experiments.py,
declared_experiments.py), applied to
a check's record: what was measured, compared with which threshold, and what a failure names.
Each `judge_*` reads one Outcome; the checks in checks/test_performance_recovery.py run the
experiment, record it (recording.record_outcome) and call the judge."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..load.errors import dead_instances
from .outcomes import InstanceRestartOutcome, ReloadOutcome, ServerRestartOutcome, ShutdownOutcome
from .recording import seconds

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


def judge_reload(check: CheckRecorder, outcome: ReloadOutcome, what: str, rate_per_s: float) -> None:
    """A reload (or rollout) under traffic fails no request (reload_failed_requests_max) and the
    reloaded model (or new version) serves within reload_serve_max_s."""
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


def judge_dead_instance(check: CheckRecorder, outcome: InstanceRestartOutcome, version: str, recovery_timeout_s: float) -> None:
    """The ready endpoints stop answering 200 while an instance is dead, and unload + load revives
    every instance within instance_recovery_max_s."""
    model, dead = outcome.model, outcome.instance
    if outcome.server_died:
        check.finding(f"{model}: the kill of one python backend stub ({dead}) took the whole server down: "
                      f"{outcome.server_died}", model=model, rule="PERF-4")
        check.recommend("A model instance must be able to die alone: read the server's log for the crash, "
                        "upgrade Triton or the python backend, and until then run two or more replicas "
                        "so that one crashing server is not an outage.")
        return
    check.measure("requests failed while the instance was dead", outcome.failed_while_dead, "requests", model=model)
    check.measure("requests failed during unload + load", outcome.failed_during_recovery, "requests", model=model)
    if outcome.failure_share is not None:
        check.measure(f"share of requests failing while 1 of {outcome.instances} instances was dead",
                      round(outcome.failure_share, 4), "ratio", model=model)
    check.evidence("probe of every instance while it was dead", outcome.probe_while_dead or "")
    server_ready, model_ready = statuses(outcome.server_ready_while_dead), statuses(outcome.model_ready_while_dead)
    check.measure("/v2/health/ready while the instance was dead", server_ready, model=model)
    check.measure(f"/v2/models/{model}/ready while the instance was dead", model_ready, model=model)
    if outcome.readiness_lied:
        check.finding(f"{model}: instance {dead} was dead and requests routed to it failed, yet /v2/health/ready "
                      f"answered {server_ready} and /v2/models/{model}/ready answered {model_ready}: the ready "
                      f"endpoints hide a dead instance (Triton {version}; model readiness reflects it from 25.12, "
                      "strict server readiness from 26.04)", model=model, rule="PERF-4")
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
        check.finding(f"{model}: not every instance answered within {recovery_timeout_s:g} s of unload + load",
                      model=model)
    check.measure("time from the kill until clients saw clean service again", seconds(outcome.impact_s), "s",
                  model=model)


def judge_server_restart(check: CheckRecorder, outcome: ServerRestartOutcome, recovery_timeout_s: float, protocol: str) -> None:
    """After a crash and restart the first correct answer comes within server_restart_max_s and no
    process of the crashed server is left."""
    model = outcome.model
    left_behind(check, outcome.left_behind, "killed")
    check.measure("time from SIGKILL until live", seconds(outcome.live_s), "s")
    check.measure("time from SIGKILL until ready", seconds(outcome.ready_s), "s")
    check.measure("time from SIGKILL until the first correct inference", seconds(outcome.first_inference_s), "s",
                  model=model, threshold=check.threshold("server_restart_max_s"))
    if outcome.first_inference_s is None:
        check.finding(f"{model}: no correct inference within {recovery_timeout_s:g} s of the restart", model=model)
    check.measure("requests failed during the outage", outcome.failed_requests, "requests", model=model)
    check.measure("time from SIGKILL until the traffic's own requests succeeded again",
                  seconds(outcome.client_recovery_s), "s", model=model)
    lag = (outcome.client_recovery_s - outcome.first_inference_s
           if outcome.client_recovery_s is not None and outcome.first_inference_s is not None else None)
    if lag is not None and lag > 1.0:
        check.finding(f"clients on a long-lived {protocol} connection resumed {lag:.1f} s after the server answered "
                      "again (reconnect backoff): the outage they see is longer than the server's",
                      severity="warning", model=model)
        check.recommend("Bound the clients' reconnect backoff (gRPC: grpc.initial_reconnect_backoff_ms and "
                        "grpc.max_reconnect_backoff_ms) or let the load balancer retry on another replica.")


def judge_sigterm(check: CheckRecorder, outcome: ShutdownOutcome) -> None:
    """SIGTERM under traffic drops readiness first (shutdown_ready_drop_max_s), loses no request
    (shutdown_lost_requests_max), and the server exits by itself, code 0, within its exit timeout,
    leaving nothing behind."""
    model = outcome.model
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
    left_behind(check, outcome.left_behind, "stopped")
    unknown_model = {r: n for r, n in outcome.refused.items() if "no available versions" in r}
    if unknown_model:
        check.finding(f"while shutting down, the server answered {sum(unknown_model.values())} requests with "
                      f"\"{next(iter(unknown_model))}\" instead of UNAVAILABLE: a client retry policy that retries "
                      "only UNAVAILABLE will not retry them on another replica", severity="warning", model=model)
        check.recommend("Take the replica out of the load balancer before SIGTERM (a preStop hook that waits "
                        "for readiness to be noticed), and let clients retry NOT_FOUND during rollouts.")
    if outcome.restart_s is not None:
        check.measure("time to start the server again after the shutdown", seconds(outcome.restart_s), "s")


def left_behind(check: CheckRecorder, pids: list[int] | None, how: str) -> None:
    """No process of the `how` (killed, stopped) server may be left running."""
    if pids is None:
        check.finding(f"processes of the {how} server could not be checked: they are not visible from this host "
                      "with this launcher", severity="info")
        return
    check.measure(f"processes of the {how} server left behind", len(pids), "processes", threshold=0, comparison="<=",
                  finding=f"processes of the {how} server still run: pids {pids}")


def statuses(seen: list[int]) -> str:
    """HTTP statuses seen while polling, as `200` or `200/400`; `no answer` for none."""
    shown = sorted({str(s) if s is not None else "no answer" for s in seen})
    return "/".join(shown) if shown else "not polled"
