"""The attach launcher: a server somebody else runs. It can be measured but not killed or restarted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..addresses import derived_url
from . import Endpoints, LauncherCapabilities, Unsupported

if TYPE_CHECKING:
    from ..settings import Settings


class AttachLauncher:
    """Points at `--triton-url`; gRPC and metrics addresses default to Triton's usual ports."""

    name = "attach"
    capabilities = LauncherCapabilities(owns_process=False, can_signal_instance=False, can_restart=False,
                                        can_read_process_memory=False, can_see_processes=False,
                                        can_start_scratch=False)
    exit_timeout_s = 30.0  # Triton's default; the attached server's own setting is not known here
    pid = None
    model_repository = None  # the attached server's repository is not on this host
    launch_identity = None  # how it was started is not known here

    def __init__(self, settings: Settings) -> None:
        http = settings.triton_url
        grpc = settings.triton_grpc_url or derived_url(http, 8001).split("://", 1)[1]
        metrics = settings.triton_metrics_url or derived_url(http, 8002, "/metrics")
        self.endpoints = Endpoints(http.rstrip("/"), grpc, metrics)
        self.failed_models: dict[str, str] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> AttachLauncher:
        return cls(settings)

    def start(self) -> Endpoints:
        return self.endpoints

    def stop(self, grace_s: float | None = None) -> None:
        return None

    def cleanup(self) -> None:
        return None

    def log_text(self, max_lines: int = 200) -> str:
        return ""

    def memory_usage(self) -> tuple[None, str]:
        return None, "server memory: the server is attached, not in a container this run started"

    def exit_code(self) -> None:
        return None

    def stubs(self, model: str | None = None) -> list:
        return []

    def process_tree(self) -> None:
        return None

    def _unsupported(self, what: str) -> Unsupported:
        return Unsupported(f"the server is attached ({self.endpoints.http_url}), not owned by this run: "
                           f"it cannot {what}")

    def kill(self) -> None:
        raise self._unsupported("be killed")

    def restart(self) -> Endpoints:
        raise self._unsupported("be restarted")

    def terminate(self) -> None:
        raise self._unsupported("be sent SIGTERM")

    def signal_process(self, pid: int, sig: int) -> None:
        raise self._unsupported("signal one of its processes")

    def scratch(self, repository) -> AttachLauncher:
        raise self._unsupported("start a second server on a scratch copy of the repository")
