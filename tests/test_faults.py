"""Fault experiments (PERF-4) against real servers: every experiment on a server the run owns,
with the expected FAIL of instance-restart readiness on Triton 2.51 and a check after the
destructive ones that still passes; against an attached server only the forced reload runs and
the rest is INCOMPLETE; the timeline logic on its own; a bad `faults:` setting."""

from __future__ import annotations

import textwrap

import psutil
import pytest
import tritonclient.grpc  # noqa: F401  imported once, here: in-process pytester runs restore sys.modules
import tritonclient.http  # noqa: F401  afterwards, and ml_dtypes cannot be imported a second time

from pytest_triton_ready.faults.timeline import bin_start, failed_between, recovered_at, split_errors, steady_state
from pytest_triton_ready.load.timeline import Bin

RECOVERY = "test_performance_recovery.py"

# Runs in the operations phase, after every PERF-4 experiment: the server they broke is whole
# again, and the hot-reload fact OPS-1 reads is there.
AFTER_FAULTS = textwrap.dedent('''
    import pytest

    from pytest_triton_ready.facts import HotReload

    @pytest.mark.triton_check("OPS-1")
    def test_server_whole_after_fault_experiments(triton, faults, triton_facts, check):
        """After the fault experiments every model answers and every instance of the fault model answers."""
        ready = {e["name"] for e in triton.client.repository_index() if e.get("state") == "READY"}
        for model in triton.models():
            assert model in ready, f"{model} is not READY after the fault experiments"
            outcome = triton.client.infer(model)
            assert outcome.ok, f"{model}: {outcome.error}"
        model = faults.choose_model()
        prober = faults.prober(model)
        try:
            probe = prober.probe()
        finally:
            prober.close()
        check.measure("probe requests answered", probe.ok, "requests", threshold=probe.sent, comparison="==")
        check.measure("live stubs of the fault model", len(faults.stubs(model)), "processes",
                      threshold=prober.instances, comparison="==")
        fact = triton_facts.require(HotReload)
        check.measure("hot reload fact: passed", str(fact.passed))
        check.measure("hot reload fact: failed requests", fact.failed_requests, "requests")
        check.measure("hot reload fact: recovery", fact.recovery_s, "s")
''')


def _measurement(result: dict, name: str) -> dict:
    for measurement in result["measurements"]:
        if measurement["name"] == name:
            return measurement
    raise AssertionError(f"no measurement {name!r} in {[m['name'] for m in result['measurements']]}")


def _verdicts(run) -> dict[str, str]:
    return {r["nodeid"].split("::")[-1]: f"{r['verdict']} {r.get('reason') or ''}".strip()
            for r in run.report["results"]}


def _timeline(result: dict) -> dict:
    charts = [c for c in result["charts"] if c["kind"] == "timeline"]
    assert charts, f"{result['nodeid']}: no timeline chart"
    return charts[0]


def test_every_experiment_on_an_owned_server(run_checklist, pytester):
    after = pytester.makepyfile(test_after_faults=AFTER_FAULTS)
    run = run_checklist(RECOVERY, "test_monitoring.py::test_metrics_endpoint_reachable_and_moving", str(after), url=None,
                        args=("--triton-launch=embedded", "--triton-progress-after=0.5"))
    # each experiment says on the terminal which phase it is in, under its own name
    progress = [line for line in run.outcome.outlines if line.startswith("  PERF-4 test_")]
    for name in ("forced reload", "new version rollout", "instance restart", "server restart", "graceful shutdown"):
        assert any(f": {name} (scale): baseline, 1.5 s of traffic at " in line for line in progress), (name, progress)
    assert any(line.endswith(": instance restart (scale): fault injected (stub scale_0_0 killed), observing the "
                             "recovery") for line in progress), progress
    assert any(line.endswith(": instance restart (scale): recovery: unload + load") for line in progress), progress
    assert any(line.endswith(": server restart (scale): fault injected (SIGKILL), observing the recovery")
               for line in progress), progress
    verdicts = _verdicts(run)
    assert sorted(v.split()[0] for v in verdicts.values()) == ["fail"] + ["pass"] * 6, verdicts
    run.outcome.assert_outcomes(passed=6, failed=1)
    report = run.report

    reload = run.result("test_forced_reload_under_traffic_loses_no_request")
    assert reload["verdict"] == "pass"
    assert _measurement(reload, "failed requests during the forced reload")["value"] == 0
    served = _measurement(reload, "time until the reloaded model serves")
    assert 0 < served["value"] <= 30 and served["passed"] is True
    chart = _timeline(reload)
    assert [m["label"] for m in chart["markers"]][:2] == ["reload requested", "reload returned"]
    successes = next(s for s in chart["series"] if s["name"] == "successes per bin")["points"]
    assert len(successes) >= 30 and sum(y for _, y in successes) > 100  # 100 ms bins, traffic flowed

    rollout = run.result("test_new_version_rollout_under_traffic_loses_no_request")
    assert rollout["verdict"] == "pass"
    assert _measurement(rollout, "failed requests during the rollout of version 2")["value"] == 0
    assert _measurement(rollout, "time until the new version serves")["value"] > 0

    dead = run.result("test_dead_instance_is_reported_and_recovers")
    assert dead["verdict"] == "fail"  # Triton 2.51: the ready endpoints keep answering 200
    assert _measurement(dead, "/v2/health/ready while the instance was dead")["value"] == "200"
    assert _measurement(dead, "/v2/models/scale/ready while the instance was dead")["value"] == "200"
    errors = [f["message"] for f in dead["findings"] if f["severity"] == "error"]
    assert len(errors) == 1 and "the ready endpoints hide a dead instance" in errors[0]
    assert "Triton 2.51" in errors[0]
    recovery = _measurement(dead, "time from unload + load until every instance answers")
    assert recovery["passed"] is True and 0 < recovery["value"] <= 30
    probe = next(e["text"] for e in dead["evidence"] if e["label"] == "probe of every instance while it was dead")
    # the death shows in the probe, or (where the python backend restarted the stub on a request
    # before the probe ran: "3027 of 3027 probe requests answered correctly", seen once in CI) in
    # the requests that failed while it was dead
    failed = _measurement(dead, "requests failed while the instance was dead")["value"]
    assert "unhealthy instances: scale_0_0" in probe or failed > 0, (probe, failed)
    assert {"stub scale_0_0 killed", "recovery: unload + load"} <= {m["label"] for m in _timeline(dead)["markers"]}

    crash = run.result("test_server_crash_restart_answers_correctly")
    assert crash["verdict"] == "pass"
    assert _measurement(crash, "processes of the killed server left behind")["value"] == 0
    first = _measurement(crash, "time from SIGKILL until the first correct inference")
    assert first["passed"] is True and first["value"] >= _measurement(crash, "time from SIGKILL until live")["value"]
    assert _measurement(crash, "requests failed during the outage")["value"] > 0  # the crash was real

    sigterm = run.result("test_sigterm_under_traffic_is_graceful")
    assert sigterm["verdict"] == "pass"
    assert _measurement(sigterm, "requests lost (taken, then failed or cut without an answer)")["value"] == 0
    assert _measurement(sigterm, "requests refused cleanly after SIGTERM")["value"] > 0
    assert _measurement(sigterm, "exit code")["value"] == 0
    assert _measurement(sigterm, "processes of the stopped server left behind")["value"] == 0
    log = next(e["text"] for e in sigterm["evidence"] if e["label"] == "server log from SIGTERM to the exit")
    assert log.startswith("Signal (15) received") and "successfully unloaded 'scale'" in log
    drop = _measurement(sigterm, "time from SIGTERM until readiness stopped answering 200")["value"]
    assert drop < _measurement(sigterm, "time from SIGTERM until the process exited")["value"]

    # The checks after the destructive experiments measured a whole server.
    assert run.result("test_metrics_endpoint_reachable_and_moving")["verdict"] == "pass"
    after_result = run.result("test_server_whole_after_fault_experiments")
    assert after_result["verdict"] == "pass"
    assert _measurement(after_result, "hot reload fact: passed")["value"] == "True"
    assert _measurement(after_result, "hot reload fact: failed requests")["value"] == 0
    assert _measurement(after_result, "hot reload fact: recovery")["value"] == served["value"]

    http_port = report["context"]["endpoints"]["http_url"].rsplit(":", 1)[1]
    left = [p.pid for p in psutil.process_iter(["cmdline"])
            if any(a == f"--http-port={http_port}" for a in (p.info["cmdline"] or []))]
    assert not left, f"tritonserver processes left behind: {left}"


def test_attached_server_runs_only_the_forced_reload(run_checklist):
    run = run_checklist(RECOVERY, url="own")
    assert sorted(v.split()[0] for v in _verdicts(run).values()) == ["incomplete"] * 4 + ["pass"], _verdicts(run)
    run.outcome.assert_outcomes(passed=1, skipped=4)
    assert run.result("test_forced_reload_under_traffic_loses_no_request")["verdict"] == "pass"
    for name in ("test_new_version_rollout_under_traffic_loses_no_request",
                 "test_dead_instance_is_reported_and_recovers", "test_server_crash_restart_answers_correctly",
                 "test_sigterm_under_traffic_is_graceful"):
        result = run.result(name)
        assert result["verdict"] == "incomplete", name
        assert "attached" in result["reason"] and "not owned by this run" in result["reason"], result["reason"]
    assert run.report["verdict"] != "READY"
    # The forced reload put the model's own configuration back.
    from pytest_triton_ready.faults import RELOAD_MARKER
    from pytest_triton_ready.server.client import TritonClient

    endpoints = run_checklist.own_server().endpoints
    client = TritonClient(endpoints.http_url, endpoints.grpc_url)
    try:
        assert RELOAD_MARKER not in (client.model_config("scale", fresh=True).get("parameters") or {})
    finally:
        client.close()


def test_no_fault_without_a_steady_state(run_checklist, demo_server, pytester):
    # 2 requests a second for half a second answer fewer requests than a steady state needs (10):
    # the steady state never holds, so nothing is reloaded.
    config = pytester.makefile(".yaml", triton_ready="faults:\n  rate_per_s: 2\n  steady_s: 0.5\n")
    run = run_checklist(RECOVERY, url="own", args=(f"--triton-config={config}", "-k", "forced_reload"))
    run.outcome.assert_outcomes(skipped=1)
    result = run.result("test_forced_reload_under_traffic_loses_no_request")
    assert result["verdict"] == "incomplete"
    assert result["reason"].startswith("no steady state before the fault, so no fault was injected: ")
    assert not [m for m in result["measurements"] if m["name"].startswith("failed requests")]
    assert _timeline(result)["markers"] == []  # no reload event: the fault was not injected


def test_bad_faults_setting_is_one_readable_line(run_checklist, pytester):
    config = pytester.makefile(".yaml", triton_ready="faults:\n  rate_per_s: -5\n")
    run = run_checklist(RECOVERY, args=(f"--triton-config={config}", "-k", "forced_reload"))
    assert run.outcome.ret == pytest.ExitCode.USAGE_ERROR
    run.outcome.stderr.fnmatch_lines([f"*{config}:2: key 'faults.rate_per_s': must be greater than 0, got -5*"])


# -- the timeline logic alone -----------------------------------------------------------------
def _bins(rows: list[tuple[int, int]], p99: float = 5.0) -> list[Bin]:
    return [Bin(round(i * 0.1, 1), ok, errors, 0, p99 if ok else None, p99 if ok else None)
            for i, (ok, errors) in enumerate(rows)]


def test_steady_state_excludes_the_bin_of_the_fault():
    bins = _bins([(4, 0)] * 10 + [(1, 3)] + [(4, 0)] * 5)
    steady = steady_state(bins, 0.0, 1.04, success_rate_min=0.999)
    assert steady.holds and steady.ok == 40 and steady.errors == 0
    broken = steady_state(bins, 0.0, 1.14, success_rate_min=0.999)
    assert not broken.holds and "3 of 44 requests failed" in broken.reason


def test_spans_cut_at_one_moment_partition_the_errors():
    bins = _bins([(4, 0), (2, 2), (0, 4), (0, 4), (3, 1), (4, 0), (4, 0), (4, 0)])
    assert failed_between(bins, 0.15, 0.33) + failed_between(bins, 0.33) == failed_between(bins, 0.0) == 11
    assert bin_start(bins, 0.33) == pytest.approx(0.3)
    assert recovered_at(bins, 0.15, hold_s=0.3) == pytest.approx(0.5)
    assert recovered_at(bins, 0.15, hold_s=0.5) is None


def test_errors_split_into_clean_refusals_and_lost_requests():
    refused, lost = split_errors({
        "UNAVAILABLE: failed to connect to all addresses; last error: Connection refused": 30,
        "NOT_FOUND: Request for unknown model: 'scale' has no available versions": 12,
        "UNAVAILABLE: [request id: <id_unknown>] Server is stopping, scheduler for model has stopped accepting "
        "new inference requests": 4,
        "UNAVAILABLE: Stream removed (recvmsg:Connection reset by peer (N))": 2,
        "timeout": 1,
    })
    assert sum(refused.values()) == 46
    assert lost == {"UNAVAILABLE: Stream removed (recvmsg:Connection reset by peer (N))": 2, "timeout": 1}
