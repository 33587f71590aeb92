"""The embedded launcher: the real `tritonserver` shipped in the nvidia-pytriton wheel, run here.

It needs no Docker and no GPU. The python backend finds its interpreter through `python3` on PATH,
so this interpreter's bin/ goes first; the stub matching this interpreter's version is copied next
to the backend in a private backends directory.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from . import Endpoints, LauncherCapabilities, LaunchError, serving_flags, stable_arguments
from .process import StubProcess, end_group, free_port, last_error_line, local_stubs, log_tail, process_tree, spawn
from .settle import failed_models, settled

DEMO_REPOSITORY = Path(__file__).resolve().parent.parent / "demo" / "models"


def pytriton_root() -> Path:
    """The installed `pytriton` package directory, or a LaunchError saying how to get it."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise LaunchError(
            "the embedded launcher needs the nvidia-pytriton wheel: pip install 'pytest-triton-ready[server]'"
        )
    return Path(list(spec.submodule_search_locations)[0])


class EmbeddedLauncher:
    """Runs tritonserver as a child process group on free loopback ports, explicit model control,
    summaries and the cache. `server.args` (`extra_args`) go last on its command line."""

    name = "embedded"
    capabilities = LauncherCapabilities(owns_process=True, can_signal_instance=True, can_restart=True,
                                        can_read_process_memory=True, can_see_processes=True,
                                        can_start_scratch=True)

    def __init__(
        self,
        model_repository: Path | None = None,
        startup_timeout_s: float = 120.0,
        extra_args: Sequence[str] = (),
        exit_timeout_s: int = 30,
    ) -> None:
        self.model_repository = Path(model_repository or DEMO_REPOSITORY).resolve()
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = list(extra_args)
        self.exit_timeout_s = exit_timeout_s
        self.workdir = Path(tempfile.mkdtemp(prefix="triton-ready-"))
        self.log_path = self.workdir / "tritonserver.log"
        self.ports = {"http": free_port(), "grpc": free_port(), "metrics": free_port()}
        self.process: subprocess.Popen | None = None
        self.failed_models: dict[str, str] = {}
        self._log = None
        self._kept_log = ""  # the log of a start that failed, once its working directory is removed

    @classmethod
    def from_settings(cls, settings) -> EmbeddedLauncher:
        return cls(settings.triton_model_repository, settings.triton_startup_timeout,
                   extra_args=settings.section_model("server").args)

    @property
    def endpoints(self) -> Endpoints:
        return Endpoints(
            f"http://127.0.0.1:{self.ports['http']}",
            f"127.0.0.1:{self.ports['grpc']}",
            f"http://127.0.0.1:{self.ports['metrics']}/metrics",
        )

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def launch_identity(self) -> dict[str, object]:
        return {"launcher": self.name, "image": None, "arguments": stable_arguments(self.command())}

    def command(self) -> list[str]:
        root = pytriton_root() / "tritonserver"
        return [
            str(root / "bin" / "tritonserver"),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={self._backends()}",
            f"--cache-directory={root / 'caches'}",
            *serving_flags(self.exit_timeout_s),
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
            f"--http-port={self.ports['http']}",
            f"--grpc-port={self.ports['grpc']}",
            f"--metrics-port={self.ports['metrics']}",
            *self.extra_args,
        ]

    def _backends(self) -> Path:
        backends = self.workdir / "backends"
        python_backend = backends / "python"
        if not python_backend.exists():
            root = pytriton_root() / "tritonserver"
            version = f"{sys.version_info.major}.{sys.version_info.minor}"
            stub = root / "python_backend_stubs" / version / "triton_python_backend_stub"
            if not stub.exists():
                raise LaunchError(f"nvidia-pytriton ships no python backend stub for Python {version}")
            shutil.copytree(root / "backends" / "python", python_backend, ignore=shutil.ignore_patterns("__pycache__"))
            shutil.copy2(stub, python_backend / stub.name)
        return backends

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        libs = pytriton_root().parent / "nvidia_pytriton.libs"
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(libs), env.get("LD_LIBRARY_PATH", "")) if p)
        env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", "")))
        return env

    def start(self) -> Endpoints:
        """Start the server and wait until it has settled: live, and every model loaded or failed
        (`failed_models`). Raise LaunchError if not; a failed start leaves nothing behind: the
        process group ended, the log closed (its text kept for `log_text`), the working directory
        removed."""
        if not self.model_repository.is_dir():
            raise LaunchError(f"model repository {self.model_repository} is not a directory")
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")
            self.process = spawn(self.command(), self._environment(), self._log)
            self._wait_until_settled()
        except BaseException:
            self._discard_failed_start()
            raise
        return self.endpoints

    def _discard_failed_start(self) -> None:
        if self.process is not None:
            end_group(self.process, grace_s=0, sig=signal.SIGKILL)
        self._close_log()
        self._kept_log = log_tail(self.log_path, 10**9) or self._kept_log
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _wait_until_settled(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        http = self.endpoints.http_url
        self.failed_models = {}
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LaunchError(
                    f"tritonserver exited with code {self.process.returncode} during start-up: {self.last_error_line()}"
                )
            index = settled(http)
            if index is not None:
                self.failed_models = failed_models(index, self.log_text(10**9))
                return
            time.sleep(0.2)
        raise LaunchError(f"tritonserver was not ready within {self.startup_timeout_s:.0f} s: {self.last_error_line()}")

    def stop(self, grace_s: float | None = None) -> int | None:
        """SIGTERM the server's process group, SIGKILL what is left after the grace period."""
        code = None
        if self.process is not None:
            code = end_group(self.process, self.exit_timeout_s + 5 if grace_s is None else grace_s)
        self._close_log()
        return code

    def _close_log(self) -> None:
        if self._log:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL the server and its stubs at once, as a crash would."""
        if self.process is not None:
            end_group(self.process, grace_s=0, sig=signal.SIGKILL)
        self._close_log()

    def restart(self) -> Endpoints:
        """Kill if running, then start again on the same ports."""
        self.kill()
        return self.start()

    def terminate(self) -> None:
        """SIGTERM the server process only (what an orchestrator does), not its whole group."""
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGTERM)

    def cleanup(self) -> None:
        """Stop, and remove the private working directory."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- processes, for fault experiments -----------------------------------------------------------
    def exit_code(self) -> int | None:
        """The server's exit code once it exited, None while it runs (or before the first start)."""
        return self.process.poll() if self.process is not None else None

    def stubs(self, model: str | None = None) -> list[StubProcess]:
        """The live python backend stubs of `model` (or of every model), children of the server."""
        return local_stubs(self.pid, model) if self.pid else []

    def signal_process(self, pid: int, sig: int) -> None:
        os.kill(pid, sig)

    def process_tree(self) -> list[int] | None:
        """The server and every live descendant."""
        return process_tree(self.pid) if self.pid else []

    def scratch(self, repository: Path) -> EmbeddedLauncher:
        """A launcher like this one (same flags, timeouts and extra args) on another repository."""
        return EmbeddedLauncher(repository, self.startup_timeout_s, self.extra_args, self.exit_timeout_s)

    # -- logs ------------------------------------------------------------------------------------
    def memory_usage(self) -> tuple[None, str]:
        return None, "server memory: the embedded server is a process, not a container (its pid's memory is read)"

    def log_text(self, max_lines: int = 200) -> str:
        """The last lines of the server's log (the kept text of a failed start once its file is gone)."""
        if self.log_path.exists():
            return log_tail(self.log_path, max_lines)
        return "\n".join(self._kept_log.splitlines()[-max_lines:])

    def last_error_line(self) -> str:
        return last_error_line(self.log_text(400))
