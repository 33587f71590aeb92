"""The container launcher: the official tritonserver image, started with testcontainers.

`ContainerLauncher` hands the specification `container_spec(settings)` builds (container_spec.py,
unit-tested without Docker) to testcontainers' `DockerContainer`, waits for readiness, keeps the logs, lets fault experiments
kill and restart the server or reach the processes inside (`exec`, `processes`, `stub_pids`,
`signal_process`), and removes the container at the end.

Host ports are chosen once, before the first start, so a restarted container answers on the same
URLs the run already uses.
"""

from __future__ import annotations

import dataclasses
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from . import Endpoints, LauncherCapabilities, LaunchError, Unsupported, stable_arguments
from .container_processes import LIST_PROCESSES_SCRIPT, parse_process_list, select_stubs
from .container_spec import CONTAINER_REPOSITORY, GRPC_PORT, HTTP_PORT, METRICS_PORT, container_spec
from .docker_engine import (
    MEMORY_EVENTS_SCRIPT,
    binding_address,
    container_memory,
    docker_failure,
    engine_address,
    killed_for_memory,
    memory_events,
    short_error,
)
from .process import StubProcess, last_error_line, log_tail, stub_of
from .settle import failed_models, settled


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
        bind_address = binding_address()
        self.spec = container_spec(settings, bind_address=bind_address, exit_timeout_s=exit_timeout_s)
        # The server's processes live in the container: signalled through `docker exec`, restarted
        # with the container; its pid is a process of this host (memory readable) only when the
        # Docker engine runs here and the runner is not itself in a container.
        self.capabilities = dataclasses.replace(type(self).capabilities,
                                                can_read_process_memory=bind_address == "127.0.0.1")
        self.failed_models: dict[str, str] = {}
        self.peak_memory_bytes: float | None = None  # sampled during start-up inside a deployment's memory limit
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

    @property
    def launch_identity(self) -> dict[str, object]:
        return {"launcher": self.name, "image": self.spec.image, "arguments": stable_arguments(self.spec.command)}

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
            raise LaunchError(docker_failure(exc, self.spec)) from None
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
            raise LaunchError(f"no Docker engine answers ({engine_address()}): {short_error(exc)}") from None
        try:
            try:
                client.images.get(self.spec.image)
            except docker.errors.ImageNotFound:
                try:
                    client.images.pull(self.spec.image)
                    client.images.get(self.spec.image)
                except Exception as exc:
                    raise LaunchError(f"image {self.spec.image} is not in the container engine "
                                      f"({engine_address()}) and could not be pulled: {short_error(exc)}") from None
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
        limited = self.spec.pod is not None and self.spec.pod.memory_bytes
        while time.monotonic() < deadline:
            state = self._state()
            if state.get("Status") in ("exited", "dead"):
                if state.get("OOMKilled"):
                    raise LaunchError(killed_for_memory(0, state.get("ExitCode"), self.spec, self.peak_memory_bytes,
                                                        "during start-up"))
                raise LaunchError(f"the tritonserver container exited with code {state.get('ExitCode')} during "
                                  f"start-up: {self.last_error_line()}")
            if limited:
                self._end_on_oom_kill("during start-up")
            index = settled(http)
            if index is not None:
                self.failed_models = failed_models(index, self.log_text(10**6))
                return
            time.sleep(0.5)
        raise LaunchError(f"the tritonserver container was not ready within {self.startup_timeout_s:.0f} s "
                          f"(log: {self.log_path})")

    def oom_kills(self) -> int | None:
        """Processes the kernel killed at the container's memory limit so far (its cgroup's count,
        read from inside), None where it cannot be read; keeps the cgroup's peak usage as well."""
        try:
            code, output = self.exec(["sh", "-c", MEMORY_EVENTS_SCRIPT])
        except LaunchError:
            return None
        events = memory_events(output) if code == 0 else None
        if events is None:
            return None
        kills, peak = events
        self.peak_memory_bytes = peak or self.peak_memory_bytes
        return kills

    def _end_on_oom_kill(self, when: str) -> None:
        """A process OOM-killed inside a memory-limited container ends the container, as a pod on
        cgroup v2 ends (memory.oom.group): Triton would wait for a killed stub for ever; LaunchError
        names the kill. Nothing where no process was killed."""
        kills = self.oom_kills()
        if not kills:
            return
        self.kill()
        raise LaunchError(killed_for_memory(kills, self.exit_code(), self.spec, self.peak_memory_bytes, when))

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
            return None, f"container memory: the engine gave no stats: {short_error(exc)}"
        return container_memory(stats)
