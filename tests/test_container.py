"""The container launcher: its specification (unit tests, no engine needed), its one-line answers
(no engine, no image, a refused resource limit), the lifecycle against a host process standing in
for the container, and a real engine (tests/container_engine.py: podman's Docker API service and a
locally built tritonserver image): start and readiness, the config and monitoring phases, the PERF-4
crash-restart and dead-instance experiments through the container, logs, memory, and removal."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from pytest_triton_ready.gate import EXIT_UNREACHABLE
from pytest_triton_ready.launchers import LaunchError
from pytest_triton_ready.launchers.container import ContainerLauncher
from pytest_triton_ready.launchers.container_processes import LIST_PROCESSES_SCRIPT, parse_process_list, select_stubs
from pytest_triton_ready.launchers.container_spec import (
    CONTAINER_REPOSITORY,
    GRPC_PORT,
    HTTP_PORT,
    METRICS_PORT,
    container_spec,
    parse_gpus,
)
from pytest_triton_ready.launchers.docker_engine import container_memory, docker_failure
from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY, EmbeddedLauncher
from pytest_triton_ready.settings import SettingsError, build_settings

IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
PORTS = {HTTP_PORT: 18000, GRPC_PORT: 18001, METRICS_PORT: 18002}


def settings_from(cli=None, environ=None, yaml_text=None, tmp_path=None):
    config_file = None
    if yaml_text is not None:
        config_file = tmp_path / "triton-ready.yaml"
        config_file.write_text(yaml_text)
    return build_settings(dict(cli or {}), {}, environ or {}, config_file=str(config_file) if config_file else None)


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
    settings = settings_from({"triton_image": IMAGE}, yaml_text="container:\n  shm_size: 2G\n", tmp_path=tmp_path)
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


# -- no engine, no image, a refused limit: one readable line --------------------------------------
DEAD_ENGINE = "unix:///nonexistent/triton-ready-test/docker.sock"


def test_without_a_docker_engine_start_fails_with_one_line(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", DEAD_ENGINE)
    launcher = ContainerLauncher(settings_from({"triton_image": IMAGE, "triton_gpus": "none",
                                                "triton_startup_timeout": "5"}))
    workdir = launcher.workdir
    with pytest.raises(LaunchError) as error:
        launcher.start()
    assert str(error.value).startswith(f"no Docker engine answers (DOCKER_HOST={DEAD_ENGINE}): ")
    assert "\n" not in str(error.value)
    assert launcher.log_text() == ""
    launcher.cleanup()
    assert not workdir.exists()


def test_checklist_stops_at_a_container_that_cannot_start_with_one_line_and_exit_8(run_checklist, monkeypatch):
    """A failed launch is reported once, not once per check: the run stops with exit code 8."""
    monkeypatch.setenv("DOCKER_HOST", DEAD_ENGINE)
    run = run_checklist("test_config.py", "test_monitoring.py", url=None,
                        args=("--triton-launch=container", f"--triton-image={IMAGE}", "--triton-gpus=none"))
    assert run.outcome.ret == 8
    output = run.outcome.stdout.str()
    assert output.count("no Docker engine answers") == 2  # the stop line and the verdict line
    assert "Traceback" not in output and "APIError" not in output
    assert run.report["verdict"] == "INCOMPLETE"


def test_checklist_without_an_image_names_the_missing_option(run_checklist):
    run = run_checklist("test_config.py", url=None, args=("--triton-launch=container",))
    assert_stopped_with_one_reason(run, "needs --triton-image")


def test_ulimits_setting_forms_and_errors(tmp_path):
    assert settings_from({}).triton_ulimits == "memlock=-1,stack=67108864"  # Triton's advice
    assert settings_from({"triton_ulimits": "stack=unlimited, nofile=1024:4096"}).triton_ulimits == \
        "stack=-1,nofile=1024:4096"
    assert settings_from({"triton_ulimits": "none"}).triton_ulimits == "none"
    yaml_settings = settings_from(yaml_text="container:\n  ulimits: {memlock: 65536, stack: 67108864}\n", tmp_path=tmp_path)
    assert yaml_settings.triton_ulimits == "memlock=65536,stack=67108864"
    assert yaml_settings.origins["triton_ulimits"].endswith("triton-ready.yaml:2 (container.ulimits)")
    for bad, expected in (("stack", "expected NAME=VALUE"), ("stak=1", "unknown limit 'stak'"),
                          ("nofile=10:5", "above the hard limit"), ("nofile=lots", "expected a number")):
        with pytest.raises(SettingsError, match=expected):
            settings_from({"triton_ulimits": bad})


def test_spec_asks_for_the_configured_ulimits_or_none():
    kwargs = container_spec(settings_from({"triton_image": IMAGE, "triton_ulimits": "stack=67108864,nofile=4096"}),
                            host_ports=PORTS).run_kwargs()
    assert {u["Name"]: (u["Soft"], u["Hard"]) for u in kwargs["ulimits"]} == {
        "stack": (67108864, 67108864), "nofile": (4096, 4096)}
    assert "ulimits" not in container_spec(settings_from({"triton_image": IMAGE, "triton_ulimits": "none"}),
                                           host_ports=PORTS).run_kwargs()


def test_a_refused_limit_is_one_line_naming_the_limit_and_the_setting():
    spec = container_spec(settings_from({"triton_image": IMAGE, "triton_ulimits": "memlock=-1,stack=67108864,nofile=4096"}),
                          host_ports=PORTS)
    runc = ('500 Server Error: Internal Server Error ("runc: runc create failed: unable to start container process: '
            'error during container init: error setting rlimits for ready process: error setting rlimit type 8: '
            'operation not permitted: OCI permission denied")')
    line = docker_failure(RuntimeError(runc), spec)
    assert line.startswith("the container engine refused the resource limit memlock=-1 "
                           "(--triton-ulimits=memlock=-1,stack=67108864,nofile=4096 (from cli; YAML container.ulimits))")
    assert line.endswith("e.g. --triton-ulimits=stack=67108864,nofile=4096")
    engine_default = docker_failure(RuntimeError(runc.replace("type 8", "type 7")),
                                     container_spec(settings_from({"triton_image": IMAGE}), host_ports=PORTS))
    assert "could not set the resource limit nofile, which --triton-ulimits=memlock=-1,stack=67108864 (from default" \
        in engine_default
    assert "--triton-ulimits=memlock=-1,stack=67108864,nofile=4096,nproc=4096" in engine_default
    assert "\n" not in line + engine_default


def test_container_memory_from_engine_stats():
    assert container_memory({"memory_stats": {"usage": 100 * 2**20, "stats": {"inactive_file": 20 * 2**20}}}) == \
        (80 * 2**20, None)
    assert container_memory({"memory_stats": {"usage": 5000, "limit": 10**9}}) == (5000.0, None)
    value, why = container_memory({"memory_stats": {}})
    assert value is None and "no memory cgroup" in why


# -- a real container engine (tests/container_engine.py: podman's API service here) --------------
def _names(client) -> set[str]:
    return {c.name for c in client.containers.list(all=True)}


def test_real_container_starts_serves_and_is_removed_with_its_volumes(container_engine, record_property):
    """Start and readiness, the endpoints, the limits and stubs inside, the engine's memory
    reading, logs, a graceful stop, and a cleanup that leaves no container and no volume."""
    from pytest_triton_ready.server.client import TritonClient

    client = container_engine.client()
    volumes_before = {v.name for v in client.volumes.list()}
    launcher = ContainerLauncher(settings_from(container_engine.settings()))
    try:
        started = time.monotonic()
        endpoints = launcher.start()
        ready_s = time.monotonic() - started
        record_property("container_start_to_ready_s", round(ready_s, 2))
        print(f"{container_engine.kind}: image build {container_engine.build_s}, start to ready {ready_s:.2f} s")
        assert TritonClient(endpoints.http_url, endpoints.grpc_url, {}, 10.0).infer("scale").ok
        name = launcher.wrapped.name
        assert name in _names(client)
        assert {s.instance for s in launcher.stubs()} == {"scale_0_0", "scale_0_1", "cached_sum_0_0", "accumulate_0_0"}
        if launcher.spec.ulimits.get("stack") == (67108864, 67108864):
            assert launcher.exec(["sh", "-c", "ulimit -s"]) == (0, "65536\n")  # KiB: the asked 64 MiB
        memory, why = launcher.memory_usage()
        assert why is None and 10 * 2**20 < memory < 8 * 2**30
        assert "successfully loaded 'scale'" in launcher.log_text(1000)
        assert launcher.stop(grace_s=40) == 0  # SIGTERM: tritonserver exits by itself
        assert "successfully unloaded 'scale'" in launcher.log_path.read_text()
    finally:
        workdir = launcher.workdir
        launcher.cleanup()
    assert name not in _names(client)
    assert {v.name for v in client.volumes.list()} == volumes_before
    assert not workdir.exists()


def test_real_engine_answers_a_missing_image_with_one_line(container_engine):
    launcher = ContainerLauncher(settings_from(container_engine.settings(
        triton_image="localhost/triton-ready/no-such-image:0")))
    try:
        with pytest.raises(LaunchError) as error:
            launcher.start()
    finally:
        launcher.cleanup()
    message = str(error.value)
    assert message.startswith("image localhost/triton-ready/no-such-image:0 is not in the container engine ")
    assert "could not be pulled" in message and "\n" not in message


def test_real_engine_refusing_a_limit_is_one_line(container_engine):
    """Triton's advice (unlimited locked memory) on an engine that cannot grant it: one line naming
    the limit and the setting; where the engine can grant it, the container simply starts."""
    launcher = ContainerLauncher(settings_from(container_engine.settings(
        triton_ulimits="memlock=-1,stack=67108864,nofile=4096,nproc=4096")))
    try:
        try:
            launcher.start()
        except LaunchError as error:
            message = str(error)
            assert message.startswith("the container engine refused the resource limit memlock=-1 "), message
            assert "--triton-ulimits=stack=67108864,nofile=4096,nproc=4096" in message and "\n" not in message
        else:
            assert launcher.exec(["sh", "-c", "ulimit -l"]) == (0, "unlimited\n")
    finally:
        launcher.cleanup()


def test_real_engine_soak_reads_the_containers_memory(container_engine):
    from pytest_triton_ready.server.metrics import scrape
    from pytest_triton_ready.soak.sampler import Sampler

    launcher = ContainerLauncher(settings_from(container_engine.settings()))
    try:
        endpoints = launcher.start()
        sampler = Sampler(lambda: scrape(endpoints.metrics_url, {}, 5.0), ["scale"], lambda: None,
                          server_memory=launcher.memory_usage)
        reading = sampler.read()
        assert reading.server_rss_bytes and reading.server_rss_bytes > 10 * 2**20, reading.notes
        assert not [note for note in reading.notes if note.startswith("container memory")]
    finally:
        launcher.cleanup()


DEPLOYMENTS = Path(__file__).resolve().parent / "data" / "deployments"


def test_real_container_runs_inside_the_deployments_limits(container_engine, tmp_path):
    """--triton-deployment's memory and CPU limits, /dev/shm and environment are the container's."""
    manifest = tmp_path / "limited.yaml"
    manifest.write_text((DEPLOYMENTS / "k8s-onprem.yaml").read_text().replace(
        "            limits:\n              nvidia.com/gpu: 1\n",
        "            limits:\n              nvidia.com/gpu: 1\n              memory: 2Gi\n              cpu: 1500m\n"))
    launcher = ContainerLauncher(settings_from(container_engine.settings(
        triton_deployment=str(manifest), triton_kubernetes_version="1.25.0")))
    try:
        launcher.start()
        launcher.wrapped.reload()
        host = launcher.wrapped.attrs["HostConfig"]
        assert (host["Memory"], host["NanoCpus"], host["ShmSize"]) == (2 * 2**30, 1_500_000_000, 64 * 2**20), host
        assert launcher.exec(["sh", "-c", "df -m /dev/shm | tail -1"])[1].split()[1] == "64"
    finally:
        launcher.cleanup()


def test_real_container_below_the_servers_peak_memory_is_oom_killed_and_the_run_says_so(run_checklist,
                                                                                         container_engine):
    """A deployment whose memory limit is below what the server needs to start: the kernel's OOM
    kill inside the container, named with the limit, the field it came from, the most the
    container used and its exit code; the run stops there (exit 8) with that line in its report."""
    manifest = DEPLOYMENTS / "broken" / "memory-limit-below-peak.yaml"
    run = run_checklist("test_config.py", url=None, args=("--triton-launch=container", *container_engine.launcher_args(),
                                                          f"--triton-deployment={manifest}",
                                                          "--triton-kubernetes-version=1.25.0"))
    output = run.outcome.stdout.str()
    assert run.outcome.ret == 8, output[-3000:]
    assert "container inside the deployment's limits: 64 MiB, no CPU limit, /dev/shm 64 MiB" in output
    line = next(line for line in output.splitlines() if "the kernel OOM-killed " in line)
    print(line)
    assert " of the tritonserver container during start-up at its memory limit 64 MiB (spec.template.spec." \
           "containers[0].resources.limits.memory in " in line
    assert "the most it used: 64 MiB; the container then ended with exit code 137" in line
    assert run.report["verdict"] == "INCOMPLETE" and "the kernel OOM-killed " in json.dumps(run.report)


def test_real_container_config_and_monitoring_phases(run_checklist, container_engine):
    """Inside the limits of Triton's own k8s-onprem chart (no memory or CPU limit, no volume at
    /dev/shm: the runtime's 64 MiB), as the pod would run it."""
    run = run_checklist("test_config.py", "test_monitoring.py", url=None,
                        args=("--triton-launch=container", *container_engine.launcher_args(),
                              f"--triton-deployment={DEPLOYMENTS / 'k8s-onprem.yaml'}",
                              "--triton-kubernetes-version=1.25.0"))
    assert run.outcome.ret in (0, 1, 6), run.outcome.stdout.str()[-2000:]  # a verdict, not a failed launch
    assert "container inside the deployment's limits: no memory limit, no CPU limit, /dev/shm 64 MiB" in \
        run.outcome.stdout.str()
    assert run.report["context"]["launcher"] == "container"
    assert {r["verdict"] for r in run.report["results"]} <= {"pass", "fail", "incomplete", "not_applicable", "skip"}
    assert run.result("test_models_answer_inference")["verdict"] == "pass"
    assert not {n for n in _names(container_engine.client()) if n.startswith("triton-ready-")}  # removed


def test_real_container_fault_experiments(run_checklist, container_engine, record_property):
    """PERF-4 through the container launcher: the server killed (SIGKILL) and the container
    started again; one python backend stub killed through exec; both judged on their merits."""
    run = run_checklist("test_performance_recovery.py", url=None,
                        args=("--triton-launch=container", *container_engine.launcher_args(),
                              "-k", "crash_restart or dead_instance"))
    assert run.outcome.ret in (0, 1), run.outcome.stdout.str()[-3000:]
    crash = run.result("test_server_crash_restart_answers_correctly")
    dead = run.result("test_dead_instance_is_reported_and_recovers")
    assert crash["verdict"] == "pass", crash
    assert dead["verdict"] == "fail", dead  # Triton 2.51: the ready endpoints hide a dead stub (triton-facts)
    numbers = {m["name"]: m["value"] for r in (crash, dead) for m in r["measurements"]}
    first = numbers["time from SIGKILL until the first correct inference"]
    recovered = numbers["time from unload + load until every instance answers"]
    record_property("crash_to_first_correct_inference_s", first)
    record_property("dead_instance_unload_load_recovery_s", recovered)
    print(f"through the container: SIGKILL to first correct inference {first} s; dead instance back "
          f"{recovered} s after unload + load")
    assert first > 0 and recovered > 0
    # The stub was found and killed inside the container: the experiment saw the instance dead.
    assert "/v2/health/ready while the instance was dead" in numbers
    assert not {n for n in _names(container_engine.client()) if n.startswith("triton-ready-")}


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
    from pytest_triton_ready.server.client import TritonClient

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
