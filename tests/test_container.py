"""The container launcher: its specification (unit tests, no Docker needed), its answer where no
Docker engine runs, and, where one answers, a real tritonserver container started, probed, killed,
restarted and removed."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from pytest_triton_ready.launchers import LaunchError
from pytest_triton_ready.launchers.container import (
    CONTAINER_REPOSITORY, GRPC_PORT, HTTP_PORT, LIST_PROCESSES_SCRIPT, METRICS_PORT, ContainerLauncher,
    container_spec, parse_gpus, parse_process_list, select_stubs,
)
from pytest_triton_ready.gate import EXIT_UNREACHABLE
from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY, EmbeddedLauncher
from pytest_triton_ready.settings import build_settings

IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
PORTS = {HTTP_PORT: 18000, GRPC_PORT: 18001, METRICS_PORT: 18002}


def settings_from(cli=None, environ=None, yaml_text=None, tmp_path=None):
    config_file = None
    if yaml_text is not None:
        config_file = tmp_path / "triton-ready.yaml"
        config_file.write_text(yaml_text)
    return build_settings(dict(cli or {}), {}, environ or {}, config_file=str(config_file) if config_file else None)


def docker_engine_reason() -> str | None:
    """None when a Docker engine answers a ping, else why not."""
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as exc:  # ImportError, DockerException, connection errors
        return f"no Docker engine answers here ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})"
    return None


# -- the specification ---------------------------------------------------------------------------
def test_spec_serves_the_repository_read_only_on_fixed_loopback_ports():
    spec = container_spec(settings_from({"triton_image": IMAGE}), host_ports=PORTS)
    assert spec.image == IMAGE
    assert spec.volumes == {str(DEMO_REPOSITORY): {"bind": CONTAINER_REPOSITORY, "mode": "ro"}}
    assert spec.ports == {"8000/tcp": ("127.0.0.1", 18000), "8001/tcp": ("127.0.0.1", 18001),
                          "8002/tcp": ("127.0.0.1", 18002)}
    command = spec.command
    assert command[0] == "tritonserver"
    assert f"--model-repository={CONTAINER_REPOSITORY}" in command
    for flag in ("--model-control-mode=explicit", "--load-model=*", "--strict-readiness=true",
                 "--metrics-config=summary_latencies=true", "--http-port=8000", "--grpc-port=8001",
                 "--metrics-port=8002"):
        assert flag in command
    assert any(arg.startswith("--cache-config=local,size=") for arg in command)


def test_spec_requests_every_gpu_by_default_as_docker_run_gpus_all_does():
    kwargs = container_spec(settings_from({"triton_image": IMAGE}), host_ports=PORTS).run_kwargs()
    [request] = kwargs["device_requests"]
    assert request["Count"] == -1
    assert request["Capabilities"] == [["gpu"]]
    assert request["DeviceIDs"] == []


def test_spec_requests_the_listed_gpus_only():
    spec = container_spec(settings_from({"triton_image": IMAGE, "triton_gpus": "0, 1"}), host_ports=PORTS)
    [request] = spec.run_kwargs()["device_requests"]
    assert request["DeviceIDs"] == ["0", "1"]
    assert request["Count"] == 0
    assert spec.gpus.describe() == "0,1"


def test_spec_with_gpus_none_asks_docker_for_no_device():
    kwargs = container_spec(settings_from({"triton_image": IMAGE, "triton_gpus": "none"}), host_ports=PORTS).run_kwargs()
    assert "device_requests" not in kwargs


def test_spec_shared_memory_and_ulimits(tmp_path):
    settings = settings_from({"triton_image": IMAGE}, yaml_text="server:\n  shm_size: 2G\n", tmp_path=tmp_path)
    kwargs = container_spec(settings, host_ports=PORTS).run_kwargs()
    assert kwargs["shm_size"] == "2g"
    limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in kwargs["ulimits"]}
    assert limits == {"memlock": (-1, -1), "stack": (67108864, 67108864)}
    default = container_spec(settings_from({"triton_image": IMAGE}), host_ports=PORTS).run_kwargs()
    assert default["shm_size"] == "1g"


def test_spec_mounts_the_given_repository(tmp_path):
    (tmp_path / "models").mkdir()
    spec = container_spec(settings_from({"triton_image": IMAGE, "triton_model_repository": str(tmp_path / "models")}),
                          host_ports=PORTS)
    assert spec.volumes == {str((tmp_path / "models").resolve()): {"bind": "/models", "mode": "ro"}}


def test_spec_picks_free_host_ports_when_none_are_given():
    spec = container_spec(settings_from({"triton_image": IMAGE}))
    assert sorted(spec.host_ports) == [8000, 8001, 8002]
    assert len(set(spec.host_ports.values())) == 3
    assert all(port > 1024 for port in spec.host_ports.values())


def test_spec_binds_every_interface_for_a_remote_docker_engine():
    spec = container_spec(settings_from({"triton_image": IMAGE}), host_ports=PORTS, bind_address="0.0.0.0")
    assert spec.ports["8000/tcp"] == ("0.0.0.0", 18000)


@pytest.mark.parametrize(("cli", "environ", "expected"), [
    ({}, {}, "needs --triton-image"),
    ({"triton_image": IMAGE, "triton_gpus": "0;1"}, {}, "--triton-gpus from cli: expected all, none"),
    ({"triton_image": IMAGE}, {"TRITON_READY_GPUS": "first"}, "--triton-gpus from env:TRITON_READY_GPUS"),
    ({"triton_image": IMAGE}, {"TRITON_READY_SHM_SIZE": "lots"}, "--triton-shm-size from env:TRITON_READY_SHM_SIZE"),
    ({"triton_image": IMAGE, "triton_model_repository": "/no/such/repository"}, {},
     "--triton-model-repository from cli: /no/such/repository is not a directory"),
])
def test_spec_rejects_bad_settings_with_one_line_naming_the_source(cli, environ, expected):
    with pytest.raises(LaunchError) as error:
        container_spec(settings_from(cli, environ), host_ports=PORTS)
    assert expected in str(error.value)
    assert "\n" not in str(error.value)


def test_gpu_lists_accept_indices_and_uuids():
    assert parse_gpus(None).all
    assert parse_gpus("ALL").all
    assert parse_gpus("none").none
    assert parse_gpus("GPU-5f3c0b8e-1d2a-4c1e-9a7b-2b4c6d8e0f11,1").device_ids == (
        "GPU-5f3c0b8e-1d2a-4c1e-9a7b-2b4c6d8e0f11", "1")


# -- reaching processes inside: the same shell script, run on this host ---------------------------
def test_process_listing_finds_the_python_backend_stubs_of_each_model(demo_server):
    """The script the launcher runs inside the container, run here against the real embedded
    server: it lists the server's stubs, and `select_stubs` tells them apart by model."""
    listing = subprocess.run(["sh", "-c", LIST_PROCESSES_SCRIPT], capture_output=True, text=True, check=True).stdout
    processes = parse_process_list(listing)
    assert os.getpid() in {pid for pid, _ in processes}
    mine = [(pid, cmd) for pid, cmd in processes if str(DEMO_REPOSITORY) in cmd and demo_server.workdir.name in cmd]
    repository = str(DEMO_REPOSITORY)
    assert len(select_stubs(mine, repository, "scale")) == 2  # two CPU instances in its config
    assert len(select_stubs(mine, repository, "cached_sum")) == 1
    assert len(select_stubs(mine, repository, "accumulate")) == 1
    assert len(select_stubs(mine, repository)) == 4
    assert select_stubs(mine, repository, "sca") == []


def test_parse_process_list_skips_kernel_threads_and_noise():
    text = ("/proc/1/cmdline:tritonserver --model-repository=/models \n/proc/2/cmdline: \nnonsense\n"
            "/proc/abc/cmdline:x\n/proc/37/cmdline:sh -c true \n")
    assert parse_process_list(text) == [(1, "tritonserver --model-repository=/models"), (37, "sh -c true")]


# -- no Docker engine: one readable line --------------------------------------------------------
@pytest.mark.skipif(docker_engine_reason() is None, reason="a Docker engine answers here")
def test_without_a_docker_engine_start_fails_with_one_line():
    launcher = ContainerLauncher(settings_from({"triton_image": IMAGE, "triton_gpus": "none",
                                                "triton_startup_timeout": "5"}))
    workdir = launcher.workdir
    with pytest.raises(LaunchError) as error:
        launcher.start()
    assert str(error.value).startswith("no Docker engine answers")
    assert "\n" not in str(error.value)
    assert launcher.log_text() == ""
    launcher.cleanup()
    assert not workdir.exists()


@pytest.mark.skipif(docker_engine_reason() is None, reason="a Docker engine answers here")
def test_checklist_reports_why_the_container_could_not_start(run_checklist):
    run = run_checklist("test_config.py", url=None, args=("--triton-launch=container", f"--triton-image={IMAGE}",
                                                          "--triton-gpus=none"))
    assert_stopped_with_one_reason(run, "no Docker engine answers")


def test_checklist_without_an_image_names_the_missing_option(run_checklist):
    run = run_checklist("test_config.py", url=None, args=("--triton-launch=container",))
    assert_stopped_with_one_reason(run, "needs --triton-image")


# -- a real container, where a Docker engine answers ---------------------------------------------
@pytest.fixture(scope="module")
def container_settings():
    reason = docker_engine_reason()
    if reason:
        pytest.skip(reason)
    return settings_from({"triton_image": os.environ.get("TRITON_READY_TEST_IMAGE", IMAGE),
                          "triton_gpus": os.environ.get("TRITON_READY_TEST_GPUS", "none"),
                          "triton_startup_timeout": "600"})


def test_container_serves_kills_stubs_restarts_and_is_removed(container_settings):
    import docker

    from pytest_triton_ready.client import TritonClient

    launcher = ContainerLauncher(container_settings)
    try:
        endpoints = launcher.start()
        client = TritonClient(endpoints.http_url, endpoints.grpc_url, {}, 10.0)
        assert client.infer("scale").ok
        stubs = launcher.stub_pids("scale")
        assert len(stubs) == 2
        launcher.signal_process(stubs[0])
        assert len(launcher.stub_pids("scale")) == 1
        assert launcher.restart() == endpoints  # the same host ports after a restart
        assert TritonClient(endpoints.http_url, endpoints.grpc_url, {}, 10.0).infer("scale").ok
        assert "successfully loaded 'scale'" in launcher.log_text(1000)
        name = launcher.wrapped.name
        assert launcher.stop() is not None
    finally:
        launcher.cleanup()
    with pytest.raises(docker.errors.NotFound):
        docker.from_env().containers.get(name)


def test_checklist_runs_against_a_container(run_checklist, container_settings):
    run = run_checklist("test_config.py", url=None, args=(
        "--triton-launch=container", f"--triton-image={container_settings.triton_image}",
        f"--triton-gpus={container_settings.triton_gpus}", "--triton-startup-timeout=600"))
    run.outcome.assert_outcomes(passed=3)
    assert run.report["context"]["launcher"] == "container"


# -- the launcher's lifecycle, with the server as a host process standing in for the container ----
class HostProcess:
    """The docker-py Container calls the launcher makes (reload/attrs, start, stop, kill, wait,
    logs), answered by the embedded tritonserver running as a host process on the spec's ports."""

    def __init__(self, spec, extra_args=()):
        self.embedded = EmbeddedLauncher(spec.model_repository, extra_args=extra_args, exit_timeout_s=5)
        self.embedded.ports = {"http": spec.host_ports[HTTP_PORT], "grpc": spec.host_ports[GRPC_PORT],
                               "metrics": spec.host_ports[METRICS_PORT]}
        self.name = f"stand-in-{self.embedded.workdir.name}"
        self.attrs: dict = {}

    def reload(self):
        process = self.embedded.process
        running = process is not None and process.poll() is None
        self.attrs = {"State": {"Status": "running" if running else "exited", "Running": running,
                                "ExitCode": None if process is None else process.returncode,
                                "Pid": process.pid if running else 0}}

    def start(self):  # like `docker start`: returns at once, readiness is the launcher's business
        from pytest_triton_ready.launchers.process import spawn

        self.embedded._log = open(self.embedded.log_path, "ab")
        self.embedded.process = spawn(self.embedded.command(), self.embedded._environment(), self.embedded._log)

    def stop(self, timeout=10):
        self.embedded.stop(grace_s=timeout)

    def kill(self, signal="SIGKILL"):
        self.embedded.kill()

    def wait(self, timeout=None):
        return {"StatusCode": self.embedded.process.wait(timeout)}

    def logs(self, stdout=True, stderr=True, tail="all"):
        data = self.embedded.log_path.read_bytes() if self.embedded.log_path.exists() else b""
        return data if tail == "all" else b"".join(data.splitlines(keepends=True)[-tail:])


class HostProcessContainer:
    """The testcontainers DockerContainer calls the launcher makes; exec runs on this host."""

    def __init__(self, spec, extra_args=()):
        self.wrapped = HostProcess(spec, extra_args)
        self.removed = False

    def start(self):
        self.wrapped.start()
        return self

    def get_container_host_ip(self):
        return "localhost"

    def get_docker_client(self):  # a local engine: reached through the mapped host ports
        mode = type("ConnectionMode", (), {"use_mapped_port": True})()
        return type("DockerClient", (), {"get_connection_mode": lambda _: mode})()

    def get_wrapped_container(self):
        return self.wrapped

    def exec(self, argv):
        done = subprocess.run(argv, capture_output=True)
        return type("ExecResult", (), {"exit_code": done.returncode, "output": done.stdout + done.stderr})()

    def stop(self, force=True, delete_volume=True):  # testcontainers' stop removes the container
        self.wrapped.embedded.cleanup()
        self.removed = True


class HostProcessLauncher(ContainerLauncher):
    extra_args: tuple[str, ...] = ()

    def _create(self):
        self.stand_in = HostProcessContainer(self.spec, self.extra_args)
        self.repository_inside = str(self.spec.model_repository)
        return self.stand_in


def test_launcher_lifecycle_kill_stub_restart_stop_and_removal(tmp_path):
    """Everything the launcher does around Docker, against the real server: readiness, endpoints on
    the chosen ports, a stub killed through exec, kill and restart on the same URLs, the log kept
    at stop, and removal with the working directory."""
    from pytest_triton_ready.client import TritonClient

    repository = tmp_path / "models"  # a path of its own, so only this server's stubs match it
    shutil.copytree(DEMO_REPOSITORY, repository, ignore=shutil.ignore_patterns("__pycache__"))
    launcher = HostProcessLauncher(settings_from({"triton_image": IMAGE, "triton_gpus": "none",
                                                  "triton_model_repository": str(repository)}), exit_timeout_s=5)
    try:
        endpoints = launcher.start()
        assert endpoints.http_url == f"http://127.0.0.1:{launcher.spec.host_ports[HTTP_PORT]}"
        assert endpoints.metrics_url == f"http://127.0.0.1:{launcher.spec.host_ports[METRICS_PORT]}/metrics"
        client = TritonClient(endpoints.http_url, endpoints.grpc_url, {}, 10.0)
        assert client.infer("scale").ok
        assert launcher.pid == launcher.stand_in.wrapped.embedded.process.pid

        stubs = launcher.stub_pids("scale")
        assert len(stubs) == 2
        found = launcher.stubs("scale")  # the protocol's view: pids with instance names
        assert {s.pid for s in found} == set(stubs) and {s.model for s in found} == {"scale"}
        assert [s.instance for s in found] == ["scale_0_0", "scale_0_1"]
        assert launcher.exit_code() is None and launcher.process_tree() is None
        mine = [pid for model in ("scale", "cached_sum", "accumulate") for pid in launcher.stub_pids(model)]
        assert len(mine) == 4 and set(mine) <= set(launcher.stub_pids())
        launcher.signal_process(stubs[0])
        deadline = time.monotonic() + 10
        while stubs[0] in launcher.stub_pids("scale") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert launcher.stub_pids("scale") == stubs[1:]
        with pytest.raises(LaunchError, match="inside the container failed"):
            launcher.signal_process(999_999_999)  # no such process

        launcher.kill()
        assert not launcher.running() and launcher.pid is None
        assert launcher.restart() == endpoints
        assert len(launcher.stub_pids("scale")) == 2
        assert TritonClient(endpoints.http_url, endpoints.grpc_url, {}, 10.0).infer("scale").ok

        assert launcher.stop() == 0
        kept = launcher.log_path.read_text()
        assert kept.count("successfully loaded 'scale'") == 2  # both starts
        assert "successfully unloaded 'scale'" in kept
        assert launcher.log_text(3) == "\n".join(kept.rstrip("\n").splitlines()[-3:])
    finally:
        workdir = launcher.workdir
        launcher.cleanup()
    assert launcher.stand_in.removed and launcher.container is None
    assert not workdir.exists()


def test_a_server_that_exits_at_start_up_is_reported_in_one_line_and_removed():
    launcher = HostProcessLauncher(settings_from({"triton_image": IMAGE, "triton_gpus": "none"}), exit_timeout_s=5)
    launcher.extra_args = ("--no-such-option",)
    try:
        with pytest.raises(LaunchError) as error:
            launcher.start()
        assert str(error.value).startswith("the tritonserver container exited with code 1 during start-up: ")
        assert "\n" not in str(error.value)
        assert launcher.stand_in.removed and launcher.container is None
        assert "no-such-option" in launcher.log_path.read_text()  # the log outlives the container
    finally:
        launcher.cleanup()


def assert_stopped_with_one_reason(run, reason: str):
    """A server that could not be started stops the run at once: exit code 8, one line naming the
    cause, and every check INCOMPLETE with that reason in the report."""
    assert run.outcome.ret == EXIT_UNREACHABLE
    assert len([line for line in run.outcome.outlines if reason in line]) <= 2  # the stop and the verdict
    assert run.report["results"] and run.report["verdict"] == "INCOMPLETE"
    for result in run.report["results"]:
        assert result["verdict"] == "incomplete" and reason in result["reason"], result
