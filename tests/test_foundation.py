"""The foundation against a real server: a healthy run, a broken model, an unreachable URL, and
no server process left behind."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import psutil

from conftest import REPO_ROOT, TEST_REPOSITORIES
from pytest_triton_ready.gate import EXIT_UNREACHABLE
from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY


def test_healthy_demo_run_passes_every_foundation_check(run_checklist):
    run = run_checklist("test_config.py", "test_monitoring.py::test_metrics_endpoint_reachable_and_moving",
                        args=(f"--triton-model-repository={DEMO_REPOSITORY}",))
    run.outcome.assert_outcomes(passed=8, skipped=1)  # skipped: CFG-4 GPU memory, not applicable without a GPU
    report = run.report
    assert report["verdict"] == "READY"
    assert report["context"]["server"]["version"].startswith("2.")
    assert {m["name"] for m in report["context"]["models"]} == {"scale", "cached_sum", "accumulate"}
    moving = run.result("test_metrics_endpoint_reachable_and_moving")
    rise = [m for m in moving["measurements"] if m["name"].startswith("nv_inference_request_success rise")]
    assert rise and rise[0]["value"] >= 1 and rise[0]["passed"] is True


def test_model_that_fails_to_load_fails_cfg1_with_the_servers_reason(run_checklist):
    repository = TEST_REPOSITORIES / "broken_model"
    run = run_checklist("test_config.py", url=None,
                        args=("--triton-launch=embedded", f"--triton-model-repository={repository}"))
    outcomes = run.outcome.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1
    assert run.outcome.ret != 0
    models_ready = run.result("test_models_ready")
    assert models_ready["verdict"] == "fail"
    messages = " ".join(f["message"] for f in models_ready["findings"])
    assert "fails_to_load" in messages and "weights file weights.bin is missing" in messages
    assert run.report["verdict"] == "NOT READY"
    run.outcome.stdout.fnmatch_lines(["*fails_to_load version 1 is UNAVAILABLE*weights.bin is missing*"])
    # the healthy model of the same repository still serves
    inference = run.result("test_models_answer_inference")
    assert inference["verdict"] == "pass"


def test_unreachable_url_stops_the_run_at_once_with_one_line(run_checklist):
    from pytest_triton_ready.launchers.process import free_port

    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    run = run_checklist("test_config.py", "test_monitoring.py", url=url)
    elapsed = time.monotonic() - started
    assert run.outcome.ret == EXIT_UNREACHABLE
    run.outcome.stdout.no_fnmatch_line("*ERROR at setup*")
    assert f"cannot reach Triton at {url}: connection refused" in run.outcome.stdout.str()
    assert "Traceback" not in run.outcome.stdout.str() + run.outcome.stderr.str()
    assert elapsed < 30, f"an unreachable server took {elapsed:.1f} s to report"
    results = run.report["results"]
    assert len(results) == run.report["scope"]["in_scope"] >= 8
    assert {(r["verdict"], r["reason"]) for r in results} == {
        ("incomplete", f"not run: cannot reach Triton at {url}: connection refused")}


def _server_processes(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if marker in cmdline and ("tritonserver" in cmdline or "triton_python_backend_stub" in cmdline):
            found.append(process)
    return found


def _private_repository(tmp_path):
    repository = tmp_path / "repository-under-test"
    shutil.copytree(DEMO_REPOSITORY, repository)
    return repository


def test_no_server_process_survives_a_launched_run(pytester, tmp_path):
    repository = _private_repository(tmp_path)
    outcome = pytester.runpytest_subprocess(
        str(REPO_ROOT / "checks" / "test_config.py"), "--triton-launch=embedded",
        f"--triton-model-repository={repository}", "-p", "no:cacheprovider",
    )
    outcome.assert_outcomes(passed=7, skipped=1)  # skipped: CFG-4 GPU memory, not applicable without a GPU
    assert _server_processes(str(repository)) == []


def test_ctrl_c_mid_run_stops_the_server_and_its_stubs(pytester, tmp_path):
    repository = _private_repository(tmp_path)
    pytester.makepyfile(test_slow="""
        import time

        def test_waits(triton):
            time.sleep(120)
    """)
    runner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "test_slow.py", "--triton-launch=embedded",
         f"--triton-model-repository={repository}", "-p", "no:cacheprovider"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(_server_processes(str(repository))) < 2:
        time.sleep(0.5)
    assert _server_processes(str(repository)), "the launched server never started"
    time.sleep(1)
    runner.send_signal(signal.SIGINT)
    output = runner.communicate(timeout=90)[0].decode()
    assert runner.returncode != 0
    assert "KeyboardInterrupt" in output
    assert _server_processes(str(repository)) == []


def test_runner_killed_outright_takes_the_server_down_with_it(tmp_path):
    repository = _private_repository(tmp_path)
    script = (
        "import sys, time\n"
        "from pytest_triton_ready.launchers.embedded import EmbeddedLauncher\n"
        f"EmbeddedLauncher({str(repository)!r}).start()\n"
        "print('started', flush=True)\n"
        "time.sleep(120)\n"
    )
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert runner.stdout.readline().strip() == b"started"
    assert _server_processes(str(repository))
    runner.kill()
    runner.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _server_processes(str(repository)):
        time.sleep(0.5)
    assert _server_processes(str(repository)) == []
