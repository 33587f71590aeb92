"""The container launcher: the official tritonserver image, started with testcontainers.

`container_spec(settings)` is a pure function: it turns the settings into the whole container
specification (image, command, GPUs, shared memory, ports, the read-only repository mount), so the
specification is unit-tested without Docker. `ContainerLauncher` hands that specification to
testcontainers' `DockerContainer`, waits for readiness, keeps the logs, lets fault experiments
kill and restart the server or reach the processes inside (`exec`, `processes`, `stub_pids`,
`signal_process`), and removes the container at the end.

Host ports are chosen once, before the first start, so a restarted container answers on the same
URLs the run already uses.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import Endpoints, LauncherCapabilities, LaunchError, Unsupported, serving_flags
from .embedded import DEMO_REPOSITORY
from .process import StubProcess, free_port, last_error_line, log_tail, stub_of
from .schema import DEFAULT_SHM_SIZE
from .settle import failed_models, settled
from .ulimits import DEFAULT_ULIMITS, format_ulimits, parse_ulimits, refusal_line

CONTAINER_REPOSITORY = "/models"
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
# Triton's own advice for `docker run`: unlimited locked memory and a 64 MiB stack (the default of
# --triton-ulimits / container.ulimits).
ULIMITS = parse_ulimits(DEFAULT_ULIMITS)
STUB_NAME = "triton_python_backend_stub"
_SHM_SIZE = re.compile(r"^[1-9][0-9]*[bkmg]?$", re.IGNORECASE)
_GPU_ID = re.compile(r"^([0-9]+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-zA-Z/-]+)$")


@dataclass(frozen=True)
class GpuRequest:
    """Which GPUs the container gets: every GPU (`all`), a list of indices or UUIDs, or none."""

    all: bool = False
    device_ids: tuple[str, ...] = ()

    @property
    def none(self) -> bool:
        return not self.all and not self.device_ids

    def describe(self) -> str:
        return "all" if self.all else (",".join(self.device_ids) or "none")


def parse_gpus(text: str | None, source: str = "default") -> GpuRequest:
    """`all` (the default), `none`, or a comma-separated list of GPU indices or UUIDs."""
    value = (text or "all").strip()
    if value.lower() == "all":
        return GpuRequest(all=True)
    if value.lower() == "none":
        return GpuRequest()
    ids = tuple(part.strip() for part in value.split(",") if part.strip())
    bad = [part for part in ids if not _GPU_ID.match(part)]
    if not ids or bad:
        raise LaunchError(f"--triton-gpus from {source}: expected all, none, or GPU indices/UUIDs like 0,1; "
                          f"got {value!r}")
    return GpuRequest(device_ids=ids)


@dataclass(frozen=True)
class ContainerSpec:
    """Everything Docker is asked for; `run_kwargs()` is what docker-py's `containers.create` takes
    beyond image, command, ports and volumes."""

    image: str
    command: tuple[str, ...]
    model_repository: Path
    gpus: GpuRequest
    shm_size: str
    host_ports: dict[int, int]
    bind_address: str = "127.0.0.1"
    environment: dict[str, str] = field(default_factory=dict)
    ulimits: dict[str, tuple[int, int]] = field(default_factory=lambda: dict(ULIMITS))
    ulimits_origin: str = "default"  # where --triton-ulimits came from, for the engine's refusal

    @property
    def ports(self) -> dict[str, tuple[str, int]]:
        """Container port -> (host address, host port), in docker-py's form."""
        return {f"{port}/tcp": (self.bind_address, host) for port, host in self.host_ports.items()}

    @property
    def volumes(self) -> dict[str, dict[str, str]]:
        """The model repository, mounted read-only where the server reads it."""
        return {str(self.model_repository): {"bind": CONTAINER_REPOSITORY, "mode": "ro"}}

    def device_requests(self) -> list[Any]:
        """docker-py DeviceRequests for the GPUs (what `docker run --gpus` sends); empty for none."""
        if self.gpus.none:
            return []
        from docker.types import DeviceRequest

        if self.gpus.all:
            return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        return [DeviceRequest(device_ids=list(self.gpus.device_ids), capabilities=[["gpu"]])]

    def run_kwargs(self) -> dict[str, Any]:
        from docker.types import Ulimit

        kwargs: dict[str, Any] = {"shm_size": self.shm_size}
        if self.ulimits:
            kwargs["ulimits"] = [Ulimit(name=name, soft=soft, hard=hard) for name, (soft, hard) in self.ulimits.items()]
        requests = self.device_requests()
        if requests:
            kwargs["device_requests"] = requests
        return kwargs


def server_command(exit_timeout_s: int = 30, extra_args: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """tritonserver's arguments inside the container: the same serving flags as the embedded
    launcher, on the image's default ports and all interfaces of the container, then `server.args`
    (`extra_args`) last, so that they win over the defaults as on the embedded launcher."""
    return (
        "tritonserver",
        f"--model-repository={CONTAINER_REPOSITORY}",
        *serving_flags(exit_timeout_s),
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        f"--metrics-port={METRICS_PORT}",
        *(str(arg) for arg in extra_args),
    )


def container_spec(settings, host_ports: dict[int, int] | None = None, bind_address: str = "127.0.0.1",
                   exit_timeout_s: int = 30) -> ContainerSpec:
    """The container the settings ask for. Raises LaunchError (one line naming the setting and
    where it came from) for a missing image, a bad GPU list, shm size or repository."""
    sources = getattr(settings, "sources", {})
    image = (settings.triton_image or "").strip()
    if not image:
        raise LaunchError("--triton-launch=container needs --triton-image, e.g. nvcr.io/nvidia/tritonserver:24.10-py3")
    repository = Path(settings.triton_model_repository or DEMO_REPOSITORY).resolve()
    if not repository.is_dir():
        raise LaunchError(f"--triton-model-repository from {sources.get('triton_model_repository', 'default')}: "
                          f"{repository} is not a directory")
    shm_size = str(getattr(settings, "triton_shm_size", None) or DEFAULT_SHM_SIZE).strip()
    if not _SHM_SIZE.match(shm_size):
        raise LaunchError(f"--triton-shm-size from {sources.get('triton_shm_size', 'default')}: expected a size "
                          f"like 1g, 512m or 268435456, got {shm_size!r}")
    gpus = parse_gpus(settings.triton_gpus, sources.get("triton_gpus", "default"))
    if host_ports is None:
        host_ports = {port: free_port() for port in (HTTP_PORT, GRPC_PORT, METRICS_PORT)}
    extra_args = settings.section_model("server").args
    ulimits_text = getattr(settings, "triton_ulimits", None) or DEFAULT_ULIMITS
    try:
        ulimits = parse_ulimits(ulimits_text)
    except ValueError as exc:
        raise LaunchError(f"--triton-ulimits from {sources.get('triton_ulimits', 'default')}: {exc}") from None
    origins = getattr(settings, "origins", {})
    return ContainerSpec(image, server_command(exit_timeout_s, extra_args), repository, gpus, shm_size.lower(),
                         dict(host_ports), bind_address, ulimits=ulimits,
                         ulimits_origin=origins.get("triton_ulimits", sources.get("triton_ulimits", "default")))


def parse_process_list(text: str) -> list[tuple[int, str]]:
    """`LIST_PROCESSES_SCRIPT`'s output (`/proc/PID/cmdline:ARGS`) -> [(pid, command line)]."""
    processes = []
    for line in text.splitlines():
        match = _PROC_LINE.match(line.strip())
        if match and match.group("cmdline").strip():
            processes.append((int(match.group("pid")), match.group("cmdline").strip()))
    return processes


def select_stubs(processes: list[tuple[int, str]], repository: str, model: str | None = None) -> list[int]:
    """Pids of python backend stubs among `processes`; with `model`, only that model's. A stub's
    first argument is its model file, `<repository>/<model>/<version>/model.py`."""
    pids = []
    for pid, cmdline in processes:
        argv = cmdline.split()
        if not argv or not argv[0].endswith(STUB_NAME):
            continue
        if model is None or (len(argv) > 1 and argv[1].startswith(f"{repository.rstrip('/')}/{model}/")):
            pids.append(pid)
    return pids


# Every process's command line in two processes (grep and tr), from /proc: no `ps` needed in the
# image. Kernel threads and zombies have an empty cmdline and print nothing.
LIST_PROCESSES_SCRIPT = "grep -a -H '' /proc/[0-9]*/cmdline 2>/dev/null | tr '\\000' ' '; true"
_PROC_LINE = re.compile(r"^/proc/(?P<pid>[0-9]+)/cmdline:(?P<cmdline>.*)$")


class ContainerLauncher:
    """Runs the tritonserver image in a container this run owns: start, stop, kill, restart, remove."""

    name = "container"
    repository_inside = CONTAINER_REPOSITORY  # where the server reads the repository (stub paths)
    # What every container launcher can do; an instance refines can_read_process_memory.
    capabilities = LauncherCapabilities(owns_process=True, can_signal_instance=True, can_restart=True,
                                        can_read_process_memory=False, can_see_processes=False,
                                        can_start_scratch=False, can_read_container_memory=True)

    def __init__(self, settings, exit_timeout_s: int = 30) -> None:
        self.settings = settings
        self.exit_timeout_s = exit_timeout_s
        self.startup_timeout_s = float(settings.triton_startup_timeout)
        bind_address = _bind_address()
        self.spec = container_spec(settings, bind_address=bind_address, exit_timeout_s=exit_timeout_s)
        # The server's processes live in the container: signalled through `docker exec`, restarted
        # with the container; its pid is a process of this host (memory readable) only when the
        # Docker engine runs here and the runner is not itself in a container.
        self.capabilities = dataclasses.replace(type(self).capabilities,
                                                can_read_process_memory=bind_address == "127.0.0.1")
        self.failed_models: dict[str, str] = {}
        self.workdir = Path(tempfile.mkdtemp(prefix="triton-ready-container-"))
        self.log_path = self.workdir / "tritonserver.log"
        self.container = None  # testcontainers DockerContainer once started
        self._host = "127.0.0.1"
        self._ports = dict(self.spec.host_ports)  # where this runner reaches each container port

    @classmethod
    def from_settings(cls, settings) -> ContainerLauncher:
        return cls(settings)

    @property
    def model_repository(self) -> Path:
        """The repository on this host, mounted read-only into the container."""
        return self.spec.model_repository

    # -- where it answers -------------------------------------------------------------------
    @property
    def endpoints(self) -> Endpoints:
        ports = self._ports
        return Endpoints(f"http://{self._host}:{ports[HTTP_PORT]}", f"{self._host}:{ports[GRPC_PORT]}",
                         f"http://{self._host}:{ports[METRICS_PORT]}/metrics")

    @property
    def wrapped(self):
        """The docker-py Container, or None before the first start."""
        if self.container is None:
            return None
        try:
            return self.container.get_wrapped_container()
        except Exception:  # testcontainers: created but never started
            return None

    @property
    def pid(self) -> int | None:
        """tritonserver's pid as the Docker host sees it (None when not running)."""
        if self.wrapped is None:
            return None
        self.wrapped.reload()
        return self.wrapped.attrs.get("State", {}).get("Pid") or None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> Endpoints:
        """Create (first time) or start again the container, and wait until the server settles.
        A container that does not get ready is removed (its log stays in `log_path`)."""
        try:
            if self.container is None:
                self.container = self._create()
                self.container.start()
                self._locate()
            else:
                self.wrapped.start()
            self._wait_until_settled()
        except Exception as exc:  # LaunchError, docker.errors.*, requests' connection errors
            self._discard()
            if isinstance(exc, LaunchError):
                raise
            raise LaunchError(_docker_failure(exc, self.spec)) from None
        return self.endpoints

    def _discard(self) -> None:
        """Keep the log and remove the container, whatever state it is in."""
        if self.container is None:
            return
        self.save_logs()
        try:
            self.container.stop()  # testcontainers: remove (force) with its volumes
        except Exception:
            pass
        self.container = None

    def _create(self):
        try:
            from testcontainers.core.container import DockerContainer
        except ImportError:
            raise LaunchError("the container launcher needs testcontainers: "
                              "pip install 'pytest-triton-ready[container]'") from None
        self._preflight()
        container = DockerContainer(self.spec.image, command=list(self.spec.command),
                                    name=f"triton-ready-{self.workdir.name.rsplit('-', 1)[-1].lower()}")
        for host, mount in self.spec.volumes.items():
            container.with_volume_mapping(host, mount["bind"], mount["mode"])
        for key, value in self.spec.environment.items():
            container.with_env(key, value)
        container.ports.update(self.spec.ports)  # (address, port) pairs: docker-py's own form
        container.with_kwargs(**self.spec.run_kwargs())
        return container

    def _preflight(self) -> None:
        """The engine answers and has the image (pulled here when it does not): one line if not."""
        import docker

        try:
            client = docker.from_env(timeout=30)
            client.ping()
        except Exception as exc:
            raise LaunchError(f"no Docker engine answers ({engine_address()}): {_short(exc)}") from None
        try:
            try:
                client.images.get(self.spec.image)
            except docker.errors.ImageNotFound:
                try:
                    client.images.pull(self.spec.image)
                    client.images.get(self.spec.image)
                except Exception as exc:
                    raise LaunchError(f"image {self.spec.image} is not in the container engine "
                                      f"({engine_address()}) and could not be pulled: {_short(exc)}") from None
        finally:
            client.close()

    def _locate(self) -> None:
        """Where this runner reaches the container: on loopback when the engine runs beside the
        runner; otherwise testcontainers knows (the Docker host, or the container's bridge address
        when the runner itself runs in a container)."""
        if self.spec.bind_address == "127.0.0.1":
            self._host, self._ports = "127.0.0.1", dict(self.spec.host_ports)
            return
        host = self.container.get_container_host_ip()
        self._host = "127.0.0.1" if host in ("localhost", "::1") else host
        try:
            mapped = self.container.get_docker_client().get_connection_mode().use_mapped_port
        except Exception:  # an older testcontainers: the Docker host and its mapped ports
            mapped = True
        self._ports = dict(self.spec.host_ports) if mapped else {port: port for port in self.spec.host_ports}

    def _wait_until_settled(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        http = self.endpoints.http_url
        self.failed_models = {}
        while time.monotonic() < deadline:
            state = self._state()
            if state.get("Status") in ("exited", "dead"):
                raise LaunchError(f"the tritonserver container exited with code {state.get('ExitCode')} during "
                                  f"start-up: {self.last_error_line()}")
            index = settled(http)
            if index is not None:
                self.failed_models = failed_models(index, self.log_text(10**6))
                return
            time.sleep(0.5)
        raise LaunchError(f"the tritonserver container was not ready within {self.startup_timeout_s:.0f} s "
                          f"(log: {self.log_path})")

    def _state(self) -> dict[str, Any]:
        self.wrapped.reload()
        return self.wrapped.attrs.get("State", {})

    def running(self) -> bool:
        return self.wrapped is not None and self._state().get("Running", False)

    def stop(self, grace_s: float | None = None) -> int | None:
        """SIGTERM tritonserver (Docker SIGKILLs it after the grace period); returns its exit code."""
        if self.wrapped is None:
            return None
        grace = self.exit_timeout_s + 5 if grace_s is None else grace_s
        try:
            if self.running():
                self.wrapped.stop(timeout=int(grace))
            code = self._state().get("ExitCode")
        except Exception:
            return None
        self.save_logs()
        return code

    def kill(self) -> None:
        """SIGKILL tritonserver, PID 1 of the container: the server and its stubs die at once."""
        if self.running():
            self.wrapped.kill(signal="SIGKILL")
            self.wrapped.wait(timeout=30)
        self.save_logs()

    def restart(self) -> Endpoints:
        """Kill if running, then start the same container again, on the same host ports."""
        self.kill()
        return self.start()

    def terminate(self) -> None:
        """SIGTERM tritonserver, PID 1 of its container (what an orchestrator does to stop it)."""
        self.signal_process(1, signal.SIGTERM)

    def exit_code(self) -> int | None:
        """The server's exit code once the container stopped, None while it runs."""
        if self.wrapped is None or self.running():
            return None
        return self._state().get("ExitCode")

    def process_tree(self) -> list[int] | None:
        """None: the container's processes are not processes this host's psutil can follow."""
        return None

    def scratch(self, repository) -> ContainerLauncher:
        raise Unsupported("the container launcher cannot start a second server on a scratch copy of the repository")

    def cleanup(self) -> None:
        """Stop, keep the logs, remove the container, and remove the private working directory."""
        try:
            self.stop()
        finally:
            self._discard()
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- logs -------------------------------------------------------------------------------------
    def save_logs(self) -> None:
        """Copy the container's whole log (stdout and stderr, every start) to `log_path`."""
        if self.wrapped is None:
            return
        try:
            text = self.wrapped.logs(stdout=True, stderr=True)
        except Exception:
            return
        self.log_path.write_bytes(text)

    def log_text(self, max_lines: int = 200) -> str:
        """The last lines of the server's log: live from Docker, else the copy kept at the last stop."""
        if self.wrapped is not None:
            try:
                return self.wrapped.logs(tail=max_lines).decode(errors="replace").rstrip("\n")
            except Exception:
                pass
        return log_tail(self.log_path, max_lines)

    def last_error_line(self) -> str:
        return last_error_line(self.log_text(400))

    # -- processes inside, for fault experiments ------------------------------------------------
    def exec(self, argv: list[str]) -> tuple[int, str]:
        """Run a command inside the running container: (exit code, output)."""
        if self.container is None:
            raise LaunchError("the container is not started")
        try:
            result = self.container.exec(list(argv))
        except Exception as exc:  # docker.errors.APIError: e.g. the container is not running
            raise LaunchError(f"exec {argv[0]} in the container failed: {' '.join(str(exc).split())[:200]}") from None
        return int(result.exit_code), result.output.decode(errors="replace")

    def processes(self) -> list[tuple[int, str]]:
        """(pid, command line) of every process inside the container, pids as the container sees them."""
        code, output = self.exec(["sh", "-c", LIST_PROCESSES_SCRIPT])
        if code != 0:
            raise LaunchError(f"could not list the container's processes: {output.strip()[:200]}")
        return parse_process_list(output)

    def stub_pids(self, model: str | None = None) -> list[int]:
        """Python backend stubs inside the container, of one model or of all."""
        return select_stubs(self.processes(), self.repository_inside, model)

    def stubs(self, model: str | None = None) -> list[StubProcess]:
        """The stubs inside the container (pids as the container sees them), with their instance
        names read from their command lines."""
        processes = self.processes()
        chosen = set(select_stubs(processes, self.repository_inside, model))
        found = []
        for pid, cmdline in processes:
            if pid in chosen:
                stub_model, instance = stub_of(cmdline.split()) or (model or "?", "?")
                found.append(StubProcess(pid, model or stub_model, instance))
        return sorted(found, key=lambda s: s.instance)

    def signal_process(self, pid: int, sig: int = signal.SIGKILL) -> None:
        """Send a signal to a process inside the container (e.g. kill a stub); the shell's own
        `kill`, so the image needs no procps."""
        code, output = self.exec(["sh", "-c", f"kill -{int(sig)} {int(pid)}"])
        if code != 0:
            raise LaunchError(f"kill -{int(sig)} {pid} inside the container failed: {output.strip()[:200]}")


    # -- the container's memory, for the soak -------------------------------------------------
    def memory_usage(self) -> tuple[float | None, str | None]:
        """(bytes, None): the container's memory as the engine's stats report it (what `docker
        stats` shows: usage less the inactive page cache); (None, why) where the engine exposes
        none, e.g. without a memory cgroup."""
        if self.wrapped is None:
            return None, "container memory: the container is not running"
        try:
            stats = self.wrapped.stats(stream=False)
        except Exception as exc:
            return None, f"container memory: the engine gave no stats: {_short(exc)}"
        return container_memory(stats)


def container_memory(stats: dict[str, Any]) -> tuple[float | None, str | None]:
    """Memory in use from a Docker API stats document, as `docker stats` computes it."""
    memory = stats.get("memory_stats") or {}
    usage = memory.get("usage")
    if not usage:
        return None, ("container memory: the engine reports no memory usage for the container (no memory cgroup "
                      "for it: cgroups off or not delegated to the engine)")
    detail = memory.get("stats") or {}
    cache = detail.get("total_inactive_file", detail.get("inactive_file", 0)) or 0
    return float(usage - cache if cache < usage else usage), None


def engine_address() -> str:
    """Where docker-py looks for the engine, for messages."""
    import os

    host = os.environ.get("DOCKER_HOST")
    return f"DOCKER_HOST={host}" if host else "DOCKER_HOST unset: /var/run/docker.sock"


def _short(exc: Exception, limit: int = 200) -> str:
    return " ".join(str(exc).split())[:limit] or type(exc).__name__


def _bind_address() -> str:
    """Loopback when the engine runs on this host and shares its network with the runner; every
    interface otherwise, since the engine's loopback is not the runner's. A runner in a container
    (/.dockerenv) whose engine is reached through a local socket is on the engine's host when the
    engine answers with this host's name (podman in the same sandbox); otherwise it is a sibling
    container of the runner (the host's socket mounted in)."""
    try:
        from testcontainers.core.docker_client import get_docker_host
        from testcontainers.core.utils import inside_container
    except ImportError:
        return "127.0.0.1"
    host = get_docker_host() or ""
    if host.startswith(("tcp://", "ssh://", "http://", "https://")):
        return "0.0.0.0"
    if not inside_container():
        return "127.0.0.1"
    return "127.0.0.1" if engine_on_this_host() else "0.0.0.0"


def engine_on_this_host() -> bool:
    """The engine reports this host's name (docker info `Name`): it runs beside the runner."""
    import socket

    try:
        import docker

        client = docker.from_env(timeout=10)
        try:
            return client.info().get("Name") == socket.gethostname()
        finally:
            client.close()
    except Exception:
        return False


def _docker_failure(exc: Exception, spec: ContainerSpec) -> str:
    """One readable line for what Docker answered."""
    text = " ".join(str(exc).split())
    refused = refusal_line(text, format_ulimits(spec.ulimits), spec.ulimits_origin)
    if refused:
        return refused
    if "ryuk" in text.lower():
        return ("testcontainers could not start its Ryuk reaper container (its image cannot be pulled here?): set "
                f"TESTCONTAINERS_RYUK_DISABLED=true ({text[:200]})")
    if "could not select device driver" in text or "nvidia-container" in text:
        return (f"Docker could not give the container GPUs ({spec.gpus.describe()}): install the NVIDIA "
                f"Container Toolkit, or run without GPUs with --triton-gpus=none ({text[:200]})")
    if any(word in text for word in ("Error while fetching server API version", "Connection refused",
                                     "FileNotFoundError", "No such file or directory")):
        return f"no Docker engine answers ({engine_address()}): {text[:200]}"
    if "not found" in text.lower() and spec.image in text:
        return f"image {spec.image} could not be pulled: {text[:200]}"
    return f"Docker failed to start {spec.image}: {type(exc).__name__}: {text[:300]}"
