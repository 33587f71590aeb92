"""What is under test: the endpoints, a client bound to them, and the launcher that owns the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .client import TritonClient, TritonUnreachable
from .launchers import Endpoints, LaunchError
from .metrics import MetricsSnapshot, scrape
from .settings import Settings


def make_launcher(settings: Settings):
    """The launcher the settings ask for; heavy launchers are imported only when chosen."""
    if settings.launch == "attach":
        from .launchers.attach import AttachLauncher

        return AttachLauncher(settings)
    if settings.launch == "embedded":
        from .launchers.embedded import EmbeddedLauncher

        return EmbeddedLauncher(settings.triton_model_repository, settings.triton_startup_timeout,
                                extra_args=settings.section("server").get("args", []))
    if settings.launch == "container":
        from .launchers.container import ContainerLauncher

        return ContainerLauncher(settings)
    raise LaunchError(f"unknown launcher {settings.launch!r}")


class Target:
    """The server under test. `client` talks to it; `launcher` can stop, kill and restart it
    when `owns_process` is true."""

    def __init__(self, settings: Settings, launcher: Any, endpoints: Endpoints) -> None:
        self.settings = settings
        self.launcher = launcher
        self.endpoints = endpoints
        self.client = TritonClient(
            endpoints.http_url, endpoints.grpc_url, settings.headers, settings.triton_request_timeout,
            settings.triton_dynamic_dim, settings.input_shapes,
        )

    @classmethod
    def open(cls, settings: Settings) -> Target:
        """Launch or attach, then make sure something answers; LaunchError/TritonUnreachable if not."""
        launcher = make_launcher(settings)
        endpoints = launcher.start()
        target = cls(settings, launcher, endpoints)
        try:
            target.client.probe()
        except TritonUnreachable:
            launcher.cleanup()
            raise
        return target

    @property
    def owns_process(self) -> bool:
        return bool(getattr(self.launcher, "owns_process", False))

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
        path = self.settings.triton_server_log
        if not path or not self.owns_process:
            return
        self.launcher.stop()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.launcher.log_text(max_lines=10**9) + "\n")
