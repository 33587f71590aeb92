"""What is under test: the endpoints, a client bound to them, and the launcher that owns the server."""

from __future__ import annotations

from pathlib import Path

from .launchers import Endpoints, Launcher
from .launchers.registry import LAUNCHER_KINDS, launcher_kind, make_launcher
from .server.client import TritonClient, TritonUnreachable
from .server.metrics import MetricsSnapshot, scrape
from .server.models import InitialState, read_initial_state
from .settings import Settings


def declared_endpoints(settings: Settings) -> Endpoints | None:
    """Where the server answers when that is known without starting anything: a launcher that
    does not own the process points at a server already running. None when the run starts it."""
    kind = launcher_kind(settings.launch)
    if kind.capabilities.owns_process:
        return None
    return kind.make(settings).endpoints


LAUNCHERS = LAUNCHER_KINDS  # `server.launch` -> the launcher; one list, in launchers/registry.py
__all__ = ["LAUNCHERS", "Target", "declared_endpoints", "make_launcher"]


class Target:
    """The server under test. `client` talks to it; `launcher` can stop, kill and restart it
    when `owns_process` is true."""

    def __init__(self, settings: Settings, launcher: Launcher, endpoints: Endpoints) -> None:
        self.settings = settings
        self.launcher = launcher
        self.endpoints = endpoints
        self.client = TritonClient(
            endpoints.http_url, endpoints.grpc_url, settings.headers, settings.triton_request_timeout,
            settings.triton_dynamic_dim, settings.input_shapes, declared=settings.input_declarations(),
        )
        self.initial_state = InitialState()  # read by open(), before the first check

    @classmethod
    def open(cls, settings: Settings) -> Target:
        """Launch or attach, then make sure something answers; LaunchError/TritonUnreachable if not."""
        launcher = make_launcher(settings)
        try:
            endpoints = launcher.start()
        except BaseException:
            try:
                _keep_log(settings, launcher)
            finally:
                launcher.cleanup()
            raise
        target = cls(settings, launcher, endpoints)
        try:
            target.client.probe()
            target.initial_state = read_initial_state(target.client, getattr(launcher, "failed_models", None))
        except TritonUnreachable:
            launcher.cleanup()
            raise
        return target

    @property
    def owns_process(self) -> bool:
        return self.launcher.capabilities.owns_process

    def models(self) -> list[str]:
        """Models in scope: the settings' list, else every model in the repository index."""
        if self.settings.triton_models:
            return list(self.settings.triton_models)
        return sorted({entry["name"] for entry in self.client.repository_index()})

    def scrape_metrics(self) -> MetricsSnapshot:
        return scrape(self.endpoints.metrics_url, self.settings.headers,
                      self.settings.threshold("metrics_scrape_timeout_s").value)

    def server_log(self, max_lines: int = 200) -> str:
        return self.launcher.log_text(max_lines)

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            try:
                self.keep_server_log()
            finally:
                self.launcher.cleanup()

    def keep_server_log(self) -> None:
        """With --triton-server-log, stop a launched server and copy its whole log there first."""
        _keep_log(self.settings, self.launcher)


def _keep_log(settings: Settings, launcher: Launcher) -> None:
    path = settings.triton_server_log
    if not path or not launcher.capabilities.owns_process:
        return
    launcher.stop()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(settings.redactor().text(launcher.log_text(max_lines=10**9)) + "\n")
