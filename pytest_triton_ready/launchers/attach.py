"""The attach launcher: a server somebody else runs. It can be measured but not killed or restarted."""

from __future__ import annotations

from ..settings import Settings, derived_url
from . import Endpoints


class AttachLauncher:
    """Points at `--triton-url`; gRPC and metrics addresses default to Triton's usual ports."""

    name = "attach"
    owns_process = False
    pid = None
    process = None

    def __init__(self, settings: Settings) -> None:
        http = settings.triton_url
        grpc = settings.triton_grpc_url or derived_url(http, 8001).split("://", 1)[1]
        metrics = settings.triton_metrics_url or derived_url(http, 8002, "/metrics")
        self.endpoints = Endpoints(http.rstrip("/"), grpc, metrics)

    def start(self) -> Endpoints:
        return self.endpoints

    def stop(self, grace_s: float | None = None) -> None:
        return None

    def cleanup(self) -> None:
        return None

    def log_text(self, max_lines: int = 200) -> str:
        return ""
