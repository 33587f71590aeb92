"""Where a measurement runs (load/plan_runners.py, LoadEngine.runner_for), without a server: here for
one worker, worker processes when more are asked or the load needs them, the Ray cluster whenever
`--triton-load-cluster` is set; the real runs are in tests/test_load.py and tests/test_ray_workers.py."""

from types import SimpleNamespace

from pytest_triton_ready.load import LoadEngine
from pytest_triton_ready.load.plan_runners import ClusterRunner, LocalRunner, ProcessRunner
from pytest_triton_ready.load.workers import IN_FLIGHT_PER_WORKER

GRPC, HTTP = "127.0.0.1:8001", "http://127.0.0.1:8000"


def engine(cluster: str | None = None) -> LoadEngine:
    return LoadEngine(None, GRPC, HTTP, {"authorization": "Bearer t"}, timeout_s=7.0,
                      settings=SimpleNamespace(triton_load_cluster=cluster))


def test_one_worker_runs_here_on_the_shared_loop():
    runner = engine().runner_for("m", 4, None, "grpc", True, 1)
    assert isinstance(runner, LocalRunner)
    assert (runner.workers, runner.cluster, runner.protocol, runner.server_stats) == (1, None, "grpc", True)


def test_workers_asked_for_run_in_processes_with_the_engines_transport():
    runner = engine().runner_for("m", 64, None, "http", False, 3)
    assert isinstance(runner, ProcessRunner)
    assert runner.workers == 3
    assert runner.transport == {"protocol": "http", "grpc_url": GRPC, "http_url": HTTP,
                                "headers": {"authorization": "Bearer t"}, "timeout_s": 7.0}
    assert runner.probe is None  # no server statistics asked, no probe


def test_auto_workers_follow_the_load_and_the_cores(monkeypatch):
    monkeypatch.setattr("pytest_triton_ready.load.workers.usable_cores", lambda: 8)
    assert isinstance(engine().runner_for("m", 1, None, "grpc", False, "auto"), LocalRunner)
    many = engine().runner_for("m", 3 * IN_FLIGHT_PER_WORKER, None, "grpc", False, "auto")
    assert isinstance(many, ProcessRunner) and many.workers == 3


def test_auto_workers_leave_the_server_half_the_cores_only_when_it_runs_on_this_host(monkeypatch):
    monkeypatch.setattr("pytest_triton_ready.load.workers.usable_cores", lambda: 8)
    load = 8 * IN_FLIGHT_PER_WORKER
    assert engine().runner_for("m", load, None, "grpc", False, "auto").workers == 4  # loopback: half of 8
    remote = LoadEngine(None, "triton.example:8001", "http://triton.example:8000",
                        settings=SimpleNamespace(triton_load_cluster=None))
    assert remote.runner_for("m", load, None, "grpc", False, "auto").workers == 7  # all but the parent's
    assert remote.runner_for("m", load, None, "http", False, "auto").workers == 7


def test_a_load_cluster_takes_every_measurement_and_says_where_it_ran():
    runner = engine("ray://10.0.0.5:10001").runner_for("m", 1, None, "grpc", False, 1)
    assert isinstance(runner, ClusterRunner)
    assert runner.workers == 0  # known once the actors are placed
    assert runner.cluster == {"address": "ray://10.0.0.5:10001", "workers": [], "max_abs_clock_offset_s": 0.0}
