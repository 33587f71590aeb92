"""Load workers on a real two-node Ray cluster started on this machine (one per test session):
one actor per node, windows merged from encoded HdrHistograms, clock offsets reported; an actor
that dies and a cluster that cannot be reached each make the measurement INCOMPLETE with one line;
the performance checklist gives the same verdicts with Ray workers as with local ones."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
from ray_cluster import RayCluster

from conftest import QUICK_CHECKLIST

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason="ray is not importable: pip install 'pytest-triton-ready[distributed]'"),
]

QUICK = ["load_warmup_s=0.3", "load_window_s=0.5", "load_min_duration_s=1.5", "load_min_requests=30",
         "load_max_windows=8", "load_stability_tolerance=0.6"]


@pytest.fixture(scope="session")
def ray_cluster():
    cluster = RayCluster(nodes=2).start()
    yield cluster
    try:
        import ray

        ray.shutdown()
    finally:
        cluster.stop()


def engine_for(launcher, cluster_address):
    from pytest_triton_ready.load import LoadEngine
    from pytest_triton_ready.settings import build_settings
    from pytest_triton_ready.target import Target

    endpoints = launcher.endpoints
    settings = build_settings({"triton_url": endpoints.http_url, "triton_grpc_url": endpoints.grpc_url,
                               "triton_metrics_url": endpoints.metrics_url, "triton_load_cluster": cluster_address},
                              {}, environ={}, cli_thresholds=QUICK)
    return LoadEngine.for_target(Target(settings, launcher, endpoints))


def test_ray_workers_one_per_node_merge_windows_and_report_clock_offsets(ray_cluster, demo_server):
    engine = engine_for(demo_server, ray_cluster.address)
    measured = engine.measure("scale", concurrency=4)
    assert measured.trustworthy, measured.problem()
    assert measured.workers == 2
    cluster = measured.to_dict()["cluster"]
    assert len({w["node_id"] for w in cluster["workers"]}) == 2, cluster
    assert cluster["max_abs_clock_offset_s"] < 0.5, cluster  # one machine: the clocks agree
    assert measured.stats.count_ok >= 30 and not measured.stats.errors
    assert measured.server_model is not None and measured.server_model.success > 0  # server side read as before


def _load_worker_processes():
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        try:
            text = " ".join(process.info["cmdline"] or []) or process.info["name"] or ""
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if text.startswith("ray::LoadWorker"):
            found.append(process)
    return found


def test_a_dead_ray_worker_makes_the_measurement_incomplete_in_one_line(ray_cluster, demo_server):
    engine = engine_for(demo_server, ray_cluster.address)
    killed = []
    # an earlier test's actor processes may still be on their way out: only this measurement's own
    # actors (started after this point) are candidates, or the kill could miss the measurement
    earlier = {process.pid for process in _load_worker_processes()}

    def kill_one():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not killed:
            workers = [p for p in _load_worker_processes() if p.pid not in earlier]
            if len(workers) == 2:
                time.sleep(2.5)  # into the measurement
                try:
                    workers[0].send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    continue  # gone meanwhile: look again
                killed.append(workers[0].pid)
            time.sleep(0.1)

    thread = threading.Thread(target=kill_one)
    thread.start()
    rules = engine.rules(max_windows=60, stability_tolerance=0.0)  # never stable: runs until the kill
    measured = engine.measure("scale", concurrency=4, rules=rules)
    thread.join()
    assert killed, "no load worker process was found to kill"
    assert not measured.trustworthy
    assert "load workers on Ray" in measured.validity_detail and "died" in measured.validity_detail, \
        measured.validity_detail
    assert "\n" not in measured.validity_detail


def test_an_unreachable_ray_cluster_is_one_line_and_incomplete(demo_server):
    from pytest_triton_ready.launchers.process import free_port

    code = f"""
import sys
sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})
from test_ray_workers import engine_for
from pytest_triton_ready.launchers.embedded import EmbeddedLauncher
launcher = EmbeddedLauncher.__new__(EmbeddedLauncher)
launcher.ports = {json.dumps(demo_server.ports)}
engine = engine_for(launcher, "127.0.0.1:{free_port()}")
m = engine.measure("scale", concurrency=2)
print("RESULT", m.valid, m.validity_detail)
"""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT")), None)  # noqa: E741
    assert line is not None, done.stdout[-2000:] + done.stderr[-2000:]
    assert line.startswith("RESULT False load workers on Ray: cannot reach the Ray cluster at 127.0.0.1:"), line
    print(f"unreachable cluster reported after {time.monotonic() - started:.1f} s: {line}")


def test_performance_checklist_gives_the_same_verdicts_with_ray_workers(ray_cluster, run_checklist):
    args = (f"--triton-config={QUICK_CHECKLIST}", "--triton-models=scale")
    local = run_checklist("test_performance.py", args=args)
    local_verdicts = {r["nodeid"]: r["verdict"] for r in local.report["results"]}
    on_ray = run_checklist("test_performance.py", args=(*args, f"--triton-load-cluster={ray_cluster.address}"))
    ray_verdicts = {r["nodeid"]: r["verdict"] for r in on_ray.report["results"]}
    print("reasons on Ray:", {r["nodeid"]: r.get("reason") for r in on_ray.report["results"]})
    print("local", local_verdicts, "\nray", ray_verdicts)
    assert local_verdicts == ray_verdicts
    assert on_ray.report["verdict"] == local.report["verdict"]
