"""PERF-4's rules on the streaming fault experiments (stream_experiments.py), applied to a check's
record: what was measured, compared with which threshold, and what a failure names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..load.streaming.stats import report_stuck
from ..server.log import read_shutdown_log
from ..server.releases import readiness_gates
from .stream_experiments import DeadStubOutcome, StreamShutdownOutcome

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


def judge_streaming_sigterm(check: CheckRecorder, outcome: StreamShutdownOutcome, version: str) -> None:
    """Every stream in flight at SIGTERM ends with its final response (at most
    shutdown_lost_requests_max cut off), none hangs, the server exits by itself with code 0 within
    its exit timeout; a drain that did not count the streams in flight is named."""
    model, exit_timeout = outcome.model, outcome.exit_timeout_s
    check.measure("streams in flight at SIGTERM", outcome.in_flight_at_sigterm, "streams", model=model)
    check.measure("of them ended with the final response", outcome.finished, "streams", model=model)
    check.measure("of them cut off without a final response", len(outcome.cut), "streams", model=model,
                  threshold=check.threshold("shutdown_lost_requests_max"),
                  finding=f"{model}: {len(outcome.cut)} streams in flight at SIGTERM were cut off without their final "
                          "response: " + "; ".join(f"{rid} after {tokens} tokens" for rid, tokens in outcome.cut[:5]))
    for rid, tokens, error in outcome.failed[:5]:
        check.finding(f"{model}: request {rid}, in flight at SIGTERM, ended with an error after {tokens} tokens: "
                      f"{error}", severity="warning", model=model)
    log = outcome.server_log
    shutdown = read_shutdown_log(log, model)
    unseen = outcome.in_flight_at_sigterm > 0 and shutdown.counted == 0  # it unloaded under live streams
    if shutdown.counted is not None:
        check.measure("in-flight inferences Triton counted at SIGTERM", shutdown.counted, "requests", model=model)
    held = shutdown.exit_timeout or (outcome.exit_s or 0) > exit_timeout
    check.measure("server exit after SIGTERM", round(outcome.exit_s, 2) if outcome.exit_s is not None else None, "s",
                  model=model, threshold=exit_timeout,
                  finding=f"{model}: the server did not exit within its exit timeout ({exit_timeout:g} s) after SIGTERM"
                          + (f": {stayed_loaded(shutdown)} ({shutdown.live_lines} log lines 'Found N live models') "
                             f"although every client stream had closed {outcome.closed_s:.1f} s after the signal"
                             if held and shutdown.live_lines and not shutdown.aborted else ""))
    check.measure("exit code", outcome.exit_code, model=model, threshold=0, comparison="==",
                  finding=f"{model}: the server exited with code {outcome.exit_code} after SIGTERM with streams in "
                          "flight" + (f": it aborted ({shutdown.aborted})" if shutdown.aborted else "")
                          + (" while it was unloading the model under streams it had not counted as in flight"
                             if shutdown.aborted and unseen else ""))
    if unseen:
        check.finding(f"{model}: Triton {version} counted none of the {outcome.in_flight_at_sigterm} streams in flight "
                      "at SIGTERM as in-flight inferences (its log: 'Found 0 model versions that have in-flight "
                      "inferences') and began to unload the model while they were still being written: the python "
                      "backend releases a request when execute() returns, and the drain waits only for requests not "
                      "yet released; an abort in the gRPC frontend in that window cuts every stream", model=model,
                      rule="shutdown-drain", severity="error" if check.errors else "warning")
        check.recommend(f"{model}: keep every request inside Triton until its final response (iterative sequence "
                        "batching, rescheduling unfinished requests with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, "
                        "as the demo `generate` does), so SIGTERM drains the streams before it unloads the model; "
                        "from Triton 2.58 (25.05) the gRPC frontend also waits for open streams before the server "
                        "stops (server PR #7969).")
    check.measure("in-flight streams finished after SIGTERM", _round(outcome.drained_s), "s", model=model)
    check.measure("client streams closed after SIGTERM", _round(outcome.closed_s), "s", model=model)
    check.measure("streams left hanging", outcome.left_hanging, "streams", model=model, threshold=0)
    report_stuck(check, outcome.model, outcome.stuck)
    check.evidence("server log at shutdown", log[log.rfind("Signal (15) received"):] if "Signal (15) received" in log
                   else log[-3000:])


def judge_streaming_dead_stub(check: CheckRecorder, outcome: DeadStubOutcome, version: str) -> None:
    """The streams the dead stub served end (an error, never a hang), the ready endpoints stop
    answering 200 (model readiness shows a dead stub from Triton 2.64, strict server readiness from
    2.68; the finding says which this server is), and unload + load brings streaming back within
    instance_recovery_max_s."""
    model = outcome.model
    check.measure("requests failed after the stub died", outcome.failed_requests, "requests", model=model)
    check.measure("streams left hanging by the dead stub", outcome.left_hanging, "streams", model=model, threshold=0)
    report_stuck(check, outcome.model, outcome.stuck)
    model_ready, server_ready = outcome.model_ready_while_dead, outcome.server_ready_while_dead
    check.measure(f"/v2/models/{model}/ready while the stub was dead", ", ".join(sorted({str(s) for s in model_ready})),
                  model=model)
    check.measure("/v2/health/ready while the stub was dead", ", ".join(sorted({str(s) for s in server_ready})),
                  model=model)
    if 200 in model_ready[-3:] or 200 in server_ready[-3:]:
        expected = [k for k, v in readiness_gates(version).items() if v]
        check.finding(f"{model}: stub {outcome.instance} was dead, yet /v2/models/{model}/ready answered "
                      f"{sorted(set(model_ready), key=str)} and /v2/health/ready {sorted(set(server_ready), key=str)}: "
                      f"Triton {version} "
                      + ("should have shown it (" + "; ".join(expected) + ")" if expected else
                         "shows a dead python stub on model readiness only from 2.64 (25.12) and on strict server "
                         "readiness from 2.68 (26.04)"), model=model, rule="readiness")
        check.recommend("Probe streaming models with real streamed requests that reach every instance (as CFG-1 "
                        "does), not with the ready endpoints alone, and recover a dead stub with unload + load.")
    check.measure("streaming again after unload + load", _round(outcome.recovered_s), "s", model=model,
                  threshold=check.threshold("instance_recovery_max_s"))


def _round(value: float | None) -> float | None:
    return round(value, 2) if value is not None else None


def stayed_loaded(shutdown: Any) -> str:
    """Which models the shutdown log shows still loaded: named from its load and unload lines."""
    names = shutdown.still_loaded
    if not names:
        return "a model stayed loaded (the log does not name which)"
    return f"{', '.join(names)} stayed loaded" if len(names) > 1 else f"{names[0]} stayed loaded"
