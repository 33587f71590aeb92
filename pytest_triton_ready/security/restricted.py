"""SEC-1: which of Triton's API categories answer a caller without credentials.

Every probe is read-only: status and settings reads, and a load and an unload of a model name that
cannot exist (`PROBE_MODEL`), which a server either refuses (restricted) or answers with an error
about the missing model (open); nothing in the repository changes either way. The probes send no
header at all, so the run's own credentials (`--triton-header`) do not mask an open API.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from ..server.api_categories import API_CATEGORIES

PROBE_MODEL = f"triton-ready-probe-{uuid.uuid4().hex[:12]}-does-not-exist"

OPEN, RESTRICTED, UNREACHABLE = "open", "restricted", "unreachable"

HTTP_PROBES: dict[str, list[tuple[str, str, bytes | None]]] = {
    "health": [("GET", "/v2/health/live", None)],
    "metadata": [("GET", "/v2", None)],
    "inference": [("POST", f"/v2/models/{PROBE_MODEL}/infer", b'{"inputs": []}')],
    "shared-memory": [("GET", "/v2/systemsharedmemory/status", None), ("GET", "/v2/cudasharedmemory/status", None)],
    "model-config": [("GET", f"/v2/models/{PROBE_MODEL}/config", None)],
    "model-repository": [("POST", "/v2/repository/index", b"{}"),
                         ("POST", f"/v2/repository/models/{PROBE_MODEL}/load", b"{}"),
                         ("POST", f"/v2/repository/models/{PROBE_MODEL}/unload", b"{}")],
    "statistics": [("GET", "/v2/models/stats", None)],
    "trace": [("GET", "/v2/trace/setting", None)],
    "logging": [("GET", "/v2/logging", None)],
}


def _grpc_probes(client) -> dict[str, list[tuple[str, Callable[[], object]]]]:
    return {
        "health": [("ServerLive", client.is_server_live)],
        "metadata": [("ServerMetadata", client.get_server_metadata)],
        "inference": [("ModelInfer", lambda: client.infer(PROBE_MODEL, []))],
        "shared-memory": [("SystemSharedMemoryStatus", client.get_system_shared_memory_status),
                          ("CudaSharedMemoryStatus", client.get_cuda_shared_memory_status)],
        "model-config": [("ModelConfig", lambda: client.get_model_config(PROBE_MODEL))],
        "model-repository": [("RepositoryIndex", client.get_model_repository_index),
                             ("RepositoryModelLoad", lambda: client.load_model(PROBE_MODEL)),
                             ("RepositoryModelUnload", lambda: client.unload_model(PROBE_MODEL))],
        "statistics": [("ModelStatistics", client.get_inference_statistics)],
        "trace": [("TraceSetting", client.get_trace_settings)],
        "logging": [("LogSettings", client.get_log_settings)],
    }


@dataclass
class ProbeAnswer:
    """What one unauthenticated request got."""

    protocol: str  # http | grpc
    call: str
    state: str  # open | restricted | unreachable
    answer: str

    def line(self) -> str:
        return f"{self.protocol:4} {self.call}: {self.state} ({self.answer})"


@dataclass
class CategoryExposure:
    """One API category over both protocols."""

    category: str
    answers: list[ProbeAnswer] = field(default_factory=list)

    def state(self, protocol: str | None = None) -> str:
        states = {a.state for a in self.answers if protocol in (None, a.protocol)}
        if OPEN in states:
            return OPEN
        if RESTRICTED in states:
            return RESTRICTED
        return UNREACHABLE

    def open_protocols(self) -> list[str]:
        return sorted({a.protocol for a in self.answers if a.state == OPEN})

    def unanswered_protocols(self) -> list[str]:
        """Protocols probed whose every probe of this category went unanswered."""
        return sorted({a.protocol for a in self.answers} - {a.protocol for a in self.answers if a.state != UNREACHABLE})

    def judged_state(self) -> str | None:
        """The state SEC-1's rule may judge: OPEN when any probe was answered without credentials,
        RESTRICTED only when every protocol probed refused, None when a protocol did not answer (no
        answer is no evidence of a restriction)."""
        if OPEN in {a.state for a in self.answers}:
            return OPEN
        if self.unanswered_protocols() or not self.answers:
            return None
        return RESTRICTED


def probe_http(http_url: str, timeout_s: float = 5.0, ssl_context: ssl.SSLContext | None = None,
               categories=API_CATEGORIES) -> dict[str, list[ProbeAnswer]]:
    """Every HTTP probe of `categories`, sent with no header."""
    found: dict[str, list[ProbeAnswer]] = {}
    for category in categories:
        for method, path, body in HTTP_PROBES[category]:
            request = urllib.request.Request(http_url.rstrip("/") + path, data=body, method=method)
            call = f"{method} {path}"
            try:
                with urllib.request.urlopen(request, timeout=timeout_s, context=ssl_context) as response:
                    answer = ProbeAnswer("http", call, OPEN, f"HTTP {response.status}")
            except urllib.error.HTTPError as exc:
                text = exc.read()[:160].decode(errors="replace")
                state = RESTRICTED if exc.code in (401, 403) else OPEN
                answer = ProbeAnswer("http", call, state, f"HTTP {exc.code} {text}".strip())
            except (urllib.error.URLError, OSError) as exc:
                answer = ProbeAnswer("http", call, UNREACHABLE, str(getattr(exc, "reason", exc)))
            found.setdefault(category, []).append(answer)
    return found


def probe_grpc(grpc_url: str, timeout_s: float = 5.0, categories=API_CATEGORIES) -> dict[str, list[ProbeAnswer]]:
    """Every gRPC probe of `categories`, sent with no metadata."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    found: dict[str, list[ProbeAnswer]] = {}
    client = grpcclient.InferenceServerClient(grpc_url)
    try:
        probes = _grpc_probes(client)
        for category in categories:
            for call, send in probes[category]:
                try:
                    send()
                    answer = ProbeAnswer("grpc", call, OPEN, "OK")
                except InferenceServerException as exc:
                    answer = ProbeAnswer("grpc", call, _grpc_state(exc), f"{exc.status()} {exc.message()[:160]}")
                found.setdefault(category, []).append(answer)
    finally:
        client.close()
    return found


def _grpc_state(exc) -> str:
    status = str(exc.status() or "")
    message = (exc.message() or "").lower()
    if status.endswith(("UNAUTHENTICATED", "PERMISSION_DENIED")) or "restricted" in message:
        return RESTRICTED
    if status.endswith(("UNAVAILABLE", "DEADLINE_EXCEEDED")):
        return UNREACHABLE
    return OPEN


def exposures(*probe_results: dict[str, list[ProbeAnswer]]) -> dict[str, CategoryExposure]:
    """Merge the HTTP and gRPC answers by category, in Triton's category order."""
    merged = {c: CategoryExposure(c) for c in API_CATEGORIES}
    for result in probe_results:
        for category, answers in result.items():
            merged[category].answers.extend(answers)
    return {c: e for c, e in merged.items() if e.answers}
