"""Against a deployment the run does not own: the run plan, safe by default, declared fault actions.

Unit layer: the plan block, the allow switches and the load ceiling, declared commands run as real
processes (a failure and a timeout). Server layer: a default attached run leaves the shared demo
server's models and configs unchanged and executes no batch above the ceiling (read from the
server's own statistics); a server started outside the run by a small supervisor (tests/attach/
supervisor.py, restarting tritonserver when it dies) runs PERF-4 through declared commands that
signal it, and the whole checklist ends READY with the waivers below.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import tritonclient.grpc  # noqa: F401  imported once, here (see tests/test_faults.py)
import tritonclient.http  # noqa: F401

from pytest_triton_ready.fault_declarations import Command, run_declared
from pytest_triton_ready.policy import CeilingGuard, parse_allow, plan_block, policy
from pytest_triton_ready.settings import SettingsError, build_settings

HERE = Path(__file__).resolve().parent
CHECKS = HERE.parent / "checks"
QUICK = (HERE / "data" / "quick-checklist.yaml").read_text()
DEMO = HERE.parent / "pytest_triton_ready" / "demo" / "models"
STAGING = "https://triton.staging.example:8000"


def _settings(tmp_path: Path | None = None, yaml: str = "", **cli):
    config = None
    if yaml:
        config = tmp_path / "triton-ready.yaml"
        config.write_text(textwrap.dedent(yaml))
    return build_settings(cli, {}, environ={}, config_file=str(config) if config else None)


# -- unit layer -------------------------------------------------------------------------------------
def test_default_attach_plan_names_owner_ceiling_and_every_refused_action():
    text = plan_block(_settings(triton_url=STAGING))
    assert f"under test: {STAGING}" in text
    assert "attached: this run does not own the server" in text
    assert "allowed (attach.allow / --triton-allow): nothing" in text
    assert "load ceiling: 8 requests in flight, 50 requests/s, request bodies up to 1 MiB" in text
    for refused in ("PERF-2   concurrency sweep", "CFG-2    closed loop at saturation"):
        line = next(line for line in text.splitlines() if refused in line)
        assert "NOT RUN, INCOMPLETE (needs saturate)" in line
    assert "80 MiB" in text and "(needs large_payloads)" in text
    assert "forced reload" in text and "(needs reload)" in text
    assert "crash + restart: NOT RUN, INCOMPLETE: no attach.fault_actions.server_crash declared" in text


def test_launched_plan_shows_built_in_faults_and_no_ceiling():
    text = plan_block(_settings())
    assert "launched: this run owns the server" in text
    assert "load ceiling" not in text and "NOT RUN" not in text
    assert "SIGKILL of the server's process group by the embedded launcher" in text


def test_plan_shows_declared_actions_and_only_checks_in_scope(tmp_path):
    settings = _settings(tmp_path, """
        attach:
          allow: [faults]
          fault_actions:
            server_crash:
              action: {run: "docker kill triton", timeout_s: 20}
              restore: {run: "docker start triton"}
    """, triton_url=STAGING)
    text = plan_block(settings, {"PERF-4"})
    assert "crash + restart: `docker kill triton` (timeout 20 s), restored by `docker start triton`" in text
    assert "SEC-3" not in text and "PERF-2" not in text


def test_allow_switch_from_cli_and_yaml_and_bad_names(tmp_path):
    assert policy(_settings(triton_url=STAGING, triton_allow="reload,saturate")).allowed == {"reload", "saturate"}
    assert policy(_settings(tmp_path, "attach: {allow: [faults]}\n", triton_url=STAGING)).allowed == {"faults"}
    with pytest.raises(SettingsError, match="--triton-allow from cli: unknown action class 'everything'"):
        _settings(triton_url=STAGING, triton_allow="everything")
    with pytest.raises(SettingsError, match="attach.allow"):
        _settings(tmp_path, "attach: {allow: [rolback]}\n", triton_url=STAGING)
    with pytest.raises(ValueError, match="known: reload, faults, saturate, large_payloads"):
        parse_allow("nope")


def test_refusal_names_the_switch_and_launched_servers_allow_everything():
    attached = policy(_settings(triton_url=STAGING))
    reason = attached.refusal("saturate", "the sweep saturates")
    assert reason.startswith(f"not run on the attached server {STAGING}: the sweep saturates")
    assert "attach: {allow: [saturate]}" in reason and "--triton-allow=saturate" in reason
    assert policy(_settings()).refusal("saturate", "x") is None
    assert policy(_settings(triton_url=STAGING, triton_allow="saturate")).ceiling_refusal(concurrency=500) is None


class _Engine:
    def __init__(self):
        self.calls = []

    def closed_loop(self, models, concurrency=None, **kwargs):
        self.calls.append(("closed", models, concurrency))

    def open_loop(self, models, rate=None, **kwargs):
        self.calls.append(("open", models, rate))

    def measure(self, model, *, concurrency=None, rate=None, **kwargs):
        self.calls.append(("measure", model, concurrency, rate))

    def rules(self):
        return "rules"


def test_ceiling_guard_refuses_load_above_the_ceiling_before_it_starts():
    engine = _Engine()
    guard = CeilingGuard(engine, policy(_settings(triton_url=STAGING)))
    guard.measure("m", concurrency=8)
    guard.open_loop(["a", "b"], 25)
    guard.closed_loop({"a": 4, "b": 4})
    assert guard.rules() == "rules" and len(engine.calls) == 3
    for call, text in ((lambda: guard.measure("m", concurrency=9), "9 requests in flight"),
                       (lambda: guard.open_loop({"a": 30, "b": 30}), "60 requests/s"),
                       (lambda: guard.closed_loop(["a", "b", "c"], 3), "9 requests in flight")):
        with pytest.raises(pytest.skip.Exception, match=text) as refused:
            call()
        assert "attach.max_" in str(refused.value) and "--triton-allow=saturate" in str(refused.value)
    assert len(engine.calls) == 3


def test_declared_command_failure_and_timeout_are_clear(tmp_path):
    ok = run_declared(Command(run="echo $TRITON_READY_MODEL; echo done"), "attach.fault_actions.sigterm.probe",
                     {"TRITON_READY_MODEL": "scale"})
    assert ok.ok and ok.last_line() == "done" and "scale" in ok.stdout and ok.problem() is None
    failed = run_declared(Command(run="echo kubectl: no pods found >&2; exit 3"), "attach.fault_actions.server_crash.action")
    assert not failed.ok
    assert failed.problem().startswith("attach.fault_actions.server_crash.action (`echo kubectl: no pods found >&2; "
                                       "exit 3`) exited with code 3 after ")
    assert failed.problem().endswith(": kubectl: no pods found")
    marker = tmp_path / "child-alive"
    started = time.monotonic()
    slow = run_declared(Command(run=f"(sleep 3; touch {marker}) & sleep 30", timeout_s=0.5), "attach.x.action")
    assert time.monotonic() - started < 5
    assert slow.timed_out and not slow.ok and "did not finish within its timeout of 0.5 s" in slow.problem()
    time.sleep(3.5)
    assert not marker.exists(), "the timed-out command's background child was left running"
    assert "timed out after 0.5 s" in slow.evidence()


# -- server layer: a default attached run ------------------------------------------------------------
def _index_and_configs(client) -> tuple[list, dict]:
    index = sorted(((e.get("name"), e.get("version"), e.get("state")) for e in client.repository_index()), key=str)
    return index, {name: client.model_config(name, fresh=True) for name, _, _ in index}


def _batches(client, model: str) -> dict[int, int]:
    stats = client.model_statistics(model) if hasattr(client, "model_statistics") else None
    if stats is None:
        status, body = client.raw(f"/v2/models/{model}/stats")
        stats = json.loads(body)
    out: dict[int, int] = {}
    for version in stats.get("model_stats", []):
        for batch in version.get("batch_stats", []):
            out[int(batch["batch_size"])] = out.get(int(batch["batch_size"]), 0) + int(batch["compute_infer"]["count"])
    return out


def test_default_attached_run_changes_nothing_and_stays_under_the_ceiling(run_checklist, demo_server, pytester):
    """The whole checklist against the shared demo server with no allow switch and a ceiling of 4:
    nothing reloaded or changed (repository index and configs), no batch above 4 executed (the
    server's batch statistics), and every refused item INCOMPLETE naming its switch."""
    from pytest_triton_ready.server.client import TritonClient

    endpoints = demo_server.endpoints
    client = TritonClient(endpoints.http_url, endpoints.grpc_url, {}, 10.0, 16, {})
    before_state = _index_and_configs(client)
    models = [name for name, _, _ in before_state[0]]
    before_batches = {m: _batches(client, m) for m in models}
    config = pytester.path / "attach.yaml"
    config.write_text(QUICK.replace("thresholds:\n", "thresholds:\n  perf_target_concurrency: 4\n")
                      + "attach: {max_concurrency: 4}\n")
    run = run_checklist(args=(f"--triton-config={config}", "-p", "no:randomly"), url="demo", allow=None)
    output = run.outcome.stdout.str()
    plan_at = output.index("triton-ready run plan")
    assert plan_at < output.index("test_config.py"), "the plan block must come before the first check"
    assert "load ceiling: 4 requests in flight, 50 requests/s" in output
    after_state = _index_and_configs(client)
    assert after_state == before_state, "an attached run without allow switches changed the server"
    for model in models:
        grown = {size: n - before_batches[model].get(size, 0) for size, n in _batches(client, model).items()
                 if n > before_batches[model].get(size, 0)}
        assert grown, f"{model}: no inference reached it during the run"
        assert max(grown) <= 4, f"{model}: batches of {max(grown)} requests ran, above the ceiling of 4: {grown}"
    client.close()
    verdicts = {r["nodeid"].split("::")[-1]: r for r in run.report["results"]}
    for name, switch in (("test_throughput_latency_curve", "saturate"),
                         ("test_dynamic_batching_under_stress", "saturate"),
                         ("test_forced_reload_under_traffic_loses_no_request", "reload")):
        result = verdicts[name]
        assert result["verdict"] == "incomplete", (name, result["verdict"], result.get("reason"))
        assert f"--triton-allow={switch}" in result["reason"], result["reason"]
    # SEC-3 sends no oversize payload without large_payloads, and Triton 2.51 answers a body cut in
    # half with HTTP 500 (server issue #8762): a judged failure outranks the case it left out.
    malformed = verdicts["test_malformed_requests_get_clean_errors"]
    assert malformed["verdict"] == "fail", malformed
    assert any("invalid JSON request is refused with HTTP 500" in f["message"] for f in malformed["findings"])
    assert any("oversize payload: not sent (large_payloads is not allowed)" in e["text"]
               for e in malformed["evidence"]), malformed["evidence"]
    crash = verdicts["test_server_crash_restart_answers_correctly"]
    assert crash["verdict"] == "incomplete" and "attach.fault_actions.server_crash" in crash["reason"]
    assert verdicts["test_benchmark_meets_slo_at_target_load"]["verdict"] in ("pass", "fail")
    assert run.outcome.ret in (1, 6)  # NOT READY (the demo declares no alert rules...) or INCOMPLETE, never READY


def test_triton_plan_prints_the_plan_and_touches_nothing(pytester):
    """--triton-plan against an address where nothing listens: exit 0 with the plan, no contact."""
    outcome = pytester.runpytest_subprocess(str(CHECKS), "--triton-url=http://127.0.0.1:9", "--triton-plan",
                                            f"--readiness-report={pytester.path / 'report'}", "-p", "no:cacheprovider")
    text = outcome.stdout.str()
    assert outcome.ret == 0, text
    assert "triton-ready run plan" in text and "under test: http://127.0.0.1:9" in text
    assert "--triton-plan: nothing was sent to the server" in text
    assert "cannot reach" not in text and not (pytester.path / "report" / "readiness.json").exists()


# -- server layer: a server started outside the run, faults by declared commands ---------------------
@pytest.fixture
def supervised(tmp_path):
    """tritonserver run by tests/attach/supervisor.py (restarts it when it dies), not by the run."""
    repository = tmp_path / "models"
    shutil.copytree(DEMO, repository, ignore=shutil.ignore_patterns("__pycache__"))
    state = tmp_path / "state"
    log = open(tmp_path / "supervisor.log", "wb")
    process = subprocess.Popen([sys.executable, str(HERE / "attach" / "supervisor.py"), str(repository), str(state)],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not (state / "endpoints.json").exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the supervised server did not start:\n" + (tmp_path / "supervisor.log").read_text())
            time.sleep(0.2)
        yield json.loads((state / "endpoints.json").read_text()), state, repository
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _declared_yaml(state: Path, repository: Path, allow: str = "[reload, faults, saturate, large_payloads]",
                   crash: str | None = None) -> str:
    python = sys.executable
    crash = crash or f'kill -KILL "$(cat {state}/pid)"'
    return textwrap.dedent(f"""
        attach:
          allow: {allow}
          fault_actions:
            server_crash:
              action: {{run: '{crash}', timeout_s: 10}}
            sigterm:
              action: {{run: 'rm -f {state}/last_exit; kill -TERM "$(cat {state}/pid)"', timeout_s: 10}}
              probe:
                run: 'for i in $(seq 400); do [ -s {state}/last_exit ] && break; sleep 0.1; done; cat {state}/last_exit'
                timeout_s: 60
            instance_kill:
              action: {{run: '{python} {HERE}/attach/kill_stub.py {state}/pid "$TRITON_READY_MODEL"', timeout_s: 30}}
            new_version:
              action:
                run: 'cp -r {repository}/$TRITON_READY_MODEL/$TRITON_READY_OLD_VERSION
                  {repository}/$TRITON_READY_MODEL/$TRITON_READY_NEW_VERSION'
              restore: {{run: 'rm -rf {repository}/$TRITON_READY_MODEL/$TRITON_READY_NEW_VERSION'}}
    """)


def _attached_run(pytester, endpoints: dict, yaml_text: str, *files: str, args: tuple[str, ...] = ()):
    config = pytester.path / "triton-ready.yaml"
    config.write_text(QUICK + yaml_text)
    report = pytester.path / "report"
    outcome = pytester.runpytest_subprocess(
        *[str(CHECKS / f) for f in files] or [str(CHECKS)], f"--triton-url={endpoints['http_url']}",
        f"--triton-grpc-url={endpoints['grpc_url']}", f"--triton-metrics-url={endpoints['metrics_url']}",
        f"--triton-config={config}", f"--readiness-report={report}", "-p", "no:cacheprovider", *args)
    document = json.loads((report / "readiness.json").read_text())
    return outcome, {r["nodeid"].split("::")[-1]: r for r in document["results"]}, document


def _measure(result: dict, name: str):
    return next(m["value"] for m in result["measurements"] if m["name"] == name)


def test_declared_faults_run_perf4_against_a_server_the_run_does_not_own(supervised, pytester):
    endpoints, state, repository = supervised
    outcome, results, _ = _attached_run(pytester, endpoints, _declared_yaml(state, repository),
                                        "test_performance_recovery.py")
    text = outcome.stdout.str()
    assert "crash + restart: `kill -KILL" in text, text
    crash = results["test_server_crash_restart_answers_correctly"]
    assert crash["verdict"] == "pass", json.dumps(crash, indent=1)[:3000]
    assert _measure(crash, "time from SIGKILL until the first correct inference") is not None
    assert any(e["label"].endswith("attach.fault_actions.server_crash.action") for e in crash["evidence"])
    sigterm = results["test_sigterm_under_traffic_is_graceful"]
    assert sigterm["verdict"] == "pass", json.dumps(sigterm, indent=1)[:3000]
    assert _measure(sigterm, "exit code") == 0
    rollout = results["test_new_version_rollout_under_traffic_loses_no_request"]
    assert rollout["verdict"] == "pass", json.dumps(rollout, indent=1)[:3000]
    assert not (repository / "scale" / "2").exists() and not any(
        p.name == "2" for m in repository.iterdir() for p in m.iterdir()), "the new version was not removed"
    dead = results["test_dead_instance_is_reported_and_recovers"]
    # Triton 2.51: the ready endpoints hide a dead stub, so the experiment fails (triton-facts)
    assert dead["verdict"] == "fail", json.dumps(dead, indent=1)[:3000]
    assert _measure(dead, "time from unload + load until every instance answers") is not None
    assert (state / "starts").read_text().count("pid") >= 3  # the first start, after the crash, after SIGTERM
    print("\n".join(f"{name}: {_measure(r, m)}" for name, r, m in (
        ("crash: first correct inference (s)", crash, "time from SIGKILL until the first correct inference"),
        ("crash: ready (s)", crash, "time from SIGKILL until ready"),
        ("sigterm: exit (s)", sigterm, "time from SIGTERM until the process exited"),
        ("sigterm: restart (s)", sigterm, "time to start the server again after the shutdown"),
        ("dead instance: recovery (s)", dead, "time from unload + load until every instance answers"))))


def test_a_declared_command_that_fails_is_an_error_finding_and_faults_need_the_switch(supervised, pytester):
    endpoints, state, repository = supervised
    yaml_text = _declared_yaml(state, repository, allow="[reload, faults]", crash="echo no such pod >&2; exit 4")
    outcome, results, _ = _attached_run(pytester, endpoints, yaml_text, "test_performance_recovery.py",
                                        args=("-k", "crash"))
    crash = results["test_server_crash_restart_answers_correctly"]
    assert crash["verdict"] == "fail", crash
    errors = [f["message"] for f in crash["findings"] if f["severity"] == "error"]
    assert any("attach.fault_actions.server_crash.action (`echo no such pod >&2; exit 4`) exited with code 4" in e
               and "no such pod" in e for e in errors), errors
    assert any(e["label"].endswith("server_crash.action") and "no such pod" in e["text"] for e in crash["evidence"])
    no_switch = _declared_yaml(state, repository, allow="[reload]")
    outcome, results, _ = _attached_run(pytester, endpoints, no_switch, "test_performance_recovery.py")
    for name in ("test_server_crash_restart_answers_correctly", "test_sigterm_under_traffic_is_graceful"):
        assert results[name]["verdict"] == "incomplete" and "--triton-allow=faults" in results[name]["reason"]
    assert (state / "starts").read_text().count("pid") == 1  # the declared commands never ran


# What the demo cannot pass, whoever runs it: it declares no alert rules, dashboard, log shipping,
# runbooks, capacity plan or restricted APIs, and Triton 2.51's ready endpoints hide a dead instance.
DEMO_WAIVERS = textwrap.dedent("""
    gate:
      waivers:
        - {check: MON-2, reason: "the demo declares no alert rules", owner: tests, expires: 2099-01-01}
        - {check: MON-3, reason: "the demo declares no dashboard", owner: tests, expires: 2099-01-01}
        - {check: MON-4, reason: "the demo declares no log shipping", owner: tests, expires: 2099-01-01}
        - {check: OPS-1, reason: "no runbook attestation for the demo", owner: tests, expires: 2099-01-01}
        - {check: OPS-2, reason: "no capacity plan for the demo", owner: tests, expires: 2099-01-01}
        - {check: OPS-3, reason: "no DR attestation for the demo", owner: tests, expires: 2099-01-01}
        - {check: OPS-4, reason: "no training attestation for the demo", owner: tests, expires: 2099-01-01}
        - {check: SEC-1, reason: "the demo restricts no API", owner: tests, expires: 2099-01-01}
        - {check: SEC-3, reason: "Triton 2.51 answers a malformed JSON body with HTTP 500 (server issue 8762)",
           owner: tests, expires: 2099-01-01}
        - {check: PERF-5, reason: "a first run has no baseline to compare with", owner: tests, expires: 2099-01-01}
        - {check: test_dead_instance_is_reported_and_recovers, owner: tests, expires: 2099-01-01,
           reason: "Triton 2.51 ready endpoints hide a dead instance"}
        - {check: test_soak_stability, owner: tests, expires: 2099-01-01,
           reason: "a short soak cannot judge the leak rule; the nightly soak does"}
""")


def test_attached_server_with_declared_faults_ends_ready(supervised, pytester):
    """The whole checklist against a server the run does not own, every action allowed, faults by
    declared commands: READY, with only the waivers above (every other check ran and passed)."""
    endpoints, state, repository = supervised
    # The repository the deployment serves, for the lint and CFG-3 (written version policies); a
    # looser stability rule: on 2 shared cores CFG-2's windows swing, which is not what this tests.
    outcome, results, document = _attached_run(
        pytester, endpoints, _declared_yaml(state, repository) + DEMO_WAIVERS,
        args=(f"--triton-model-repository={repository}", "--triton-threshold", "load_stability_tolerance=3"))
    text = outcome.stdout.str()
    summary = {name: (r["verdict"], r.get("reason")) for name, r in results.items()}
    assert outcome.ret == 0, text[-6000:] + "\n" + json.dumps(summary, indent=1)
    assert document["scope"]["not_run"] == []
    waived = {entry["check_id"] for entry in document["scope"]["waived"]}
    assert waived == {"MON-2", "MON-3", "MON-4", "OPS-1", "OPS-2", "OPS-3", "OPS-4", "SEC-1", "SEC-3", "PERF-3", "PERF-4",
                      "PERF-5"}, waived
    for name in ("test_server_crash_restart_answers_correctly", "test_sigterm_under_traffic_is_graceful",
                 "test_new_version_rollout_under_traffic_loses_no_request",
                 "test_forced_reload_under_traffic_loses_no_request"):
        assert results[name]["verdict"] == "pass", (name, results[name])
