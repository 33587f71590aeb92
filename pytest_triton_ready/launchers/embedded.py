"""The embedded launcher: the real `tritonserver` shipped in the nvidia-pytriton wheel, run here.

It needs no Docker and no GPU. The python backend finds its interpreter through `python3` on PATH,
so this interpreter's bin/ goes first; the stub matching this interpreter's version is copied next
to the backend in a private backends directory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Sequence

from . import Endpoints, LaunchError, serving_flags
from .process import end_group, free_port, last_error_line, log_tail, spawn

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
    """Runs tritonserver on free loopback ports with explicit model control, summaries and the cache."""

    name = "embedded"
    owns_process = True

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
        self._log = None

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
        """Start the server and wait until it is live and done loading; raise LaunchError if not."""
        if not self.model_repository.is_dir():
            raise LaunchError(f"model repository {self.model_repository} is not a directory")
        self._log = open(self.log_path, "ab")
        self.process = spawn(self.command(), self._environment(), self._log)
        self._wait_until_settled()
        return self.endpoints

    def _wait_until_settled(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        http = self.endpoints.http_url
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LaunchError(
                    f"tritonserver exited with code {self.process.returncode} during start-up: {self.last_error_line()}"
                )
            if _status(f"{http}/v2/health/ready") == 200:
                return
            if _status(f"{http}/v2/health/live") == 200 and _loading_finished(http):
                return
            time.sleep(0.2)
        self.stop()
        raise LaunchError(f"tritonserver was not ready within {self.startup_timeout_s:.0f} s (log: {self.log_path})")

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

    def cleanup(self) -> None:
        """Stop, and remove the private working directory."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def log_text(self, max_lines: int = 200) -> str:
        """The last lines of the server's log."""
        return log_tail(self.log_path, max_lines)

    def last_error_line(self) -> str:
        return last_error_line(self.log_text(400))


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return None


def _loading_finished(http_url: str) -> bool:
    request = urllib.request.Request(f"{http_url}/v2/repository/index", data=b"{}", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            index = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return all(entry.get("state") not in ("LOADING", "UNLOADING", None) for entry in index)
