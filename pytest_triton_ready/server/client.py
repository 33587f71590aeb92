"""One facade over tritonclient's HTTP and gRPC clients: what the checks ask of a server.

Control-plane calls (health, metadata, config, repository, statistics) go over HTTP; `infer`
speaks either protocol. Inputs come from the team's declarations (`inputs.data` files in
perf_analyzer's format, round-robin) or are synthesized from the model's metadata and config,
random on every call so that a response cache cannot answer in the model's place.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from ..errors import TritonReadyError
from ..inputs import InputDeclarations, refusal_hint, synthesize_inputs

UNREACHABLE = "cannot reach Triton"


def http_status(url: str, timeout_s: float = 2.0) -> int | None:
    """The status of a GET on a fresh connection (as a load balancer's probe sees it); None when
    nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return None


def is_timeout(exc: BaseException) -> bool:
    """Whether a transport error is a timeout (socket, gevent, or gRPC's DEADLINE_EXCEEDED)."""
    reason = getattr(exc, "reason", exc)
    status = getattr(exc, "status", None)
    text = f"{status() if callable(status) else status or ''} {reason}".lower()
    return isinstance(reason, TimeoutError) or "timed out" in text or "deadline" in text or "timeout" in text


def unanswered(model: str, timeout_s: float, live: bool) -> str:
    """The cause of a request that got no answer in time: the model, when the server is live."""
    state = "server live" if live else "the server does not answer /v2/health/live either"
    return f"{model} did not answer within {timeout_s:g} s ({state})"


class TritonUnreachable(TritonReadyError, ConnectionError):
    """The server does not answer at all; the message is the one line a user sees."""


class UnansweredRequest(TritonReadyError, ConnectionError):
    """The server is live but one request got no answer within the request timeout; the message
    names the model the request was for."""


def _model_in_path(path: str) -> str | None:
    parts = path.split("/")
    return parts[3] if len(parts) > 3 and parts[1:3] == ["v2", "models"] and parts[3] else None


@dataclass
class InferOutcome:
    """One inference: the outputs by name, or the error the server (or transport) gave."""

    model: str
    ok: bool
    latency_s: float
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    error: str | None = None
    refused: bool = False  # the server answered with an error (not a timeout or a lost connection)


def describe_connection_error(url: str, exc: BaseException) -> str:
    """'cannot reach Triton at URL: connection refused' from whatever the socket layer raised."""
    reason = getattr(exc, "reason", exc)
    text = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
    return f"{UNREACHABLE} at {url}: {text.lower()}"


class TritonClient:
    """Health, metadata, repository control, statistics and inference against one server."""

    def __init__(self, http_url: str, grpc_url: str, headers: Mapping[str, str] | None = None,
                 timeout_s: float = 10.0, dynamic_dim: int = 16,
                 input_shapes: Mapping[str, Mapping[str, list[int]]] | None = None,
                 declared: InputDeclarations | None = None) -> None:
        import tritonclient.http as httpclient

        self.http_url = http_url.rstrip("/")
        self.grpc_url = grpc_url
        self.headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.changes = 0  # models loaded or unloaded through this client: each one changes the server
        self.dynamic_dim = dynamic_dim
        self.declared = declared or InputDeclarations(dynamic_dim=dynamic_dim)
        self.input_shapes = {**{m: dict(s) for m, s in (input_shapes or {}).items()}, **self.declared.shapes}
        self._entries: dict[str, int] = {}  # next declared data entry per model (round-robin)
        parts = urlsplit(self.http_url)
        self.http = httpclient.InferenceServerClient(
            parts.netloc, ssl=parts.scheme == "https", connection_timeout=timeout_s, network_timeout=timeout_s
        )
        self._grpc = None
        self._configs: dict[str, dict[str, Any]] = {}
        self._metadata: dict[str, dict[str, Any]] = {}

    # -- reachability --------------------------------------------------------------------------
    def probe(self) -> int:
        """GET /v2/health/live; the HTTP status, or TritonUnreachable with one readable line."""
        return self.get_status("/v2/health/live")

    def get_status(self, path: str, method: str = "GET", body: bytes | None = None) -> int:
        """The HTTP status of one raw request (400 and 403 are answers, not errors)."""
        return self.raw(path, method, body)[0]

    def raw(self, path: str, method: str = "GET", body: bytes | None = None,
            headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        """One raw HTTP request: (status, body). Raises TritonUnreachable when nothing answers, and
        UnansweredRequest when the server is live but this request timed out."""
        request = urllib.request.Request(
            self.http_url + path, data=body, method=method, headers={**self.headers, **(headers or {})}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            if is_timeout(exc) and self._live_now():
                model = _model_in_path(path)
                raise UnansweredRequest(unanswered(model, self.timeout_s, True) if model else
                                        f"{method} {path} got no answer within {self.timeout_s:g} s (server live)") from None
            raise TritonUnreachable(describe_connection_error(self.http_url, exc)) from None

    # -- health and metadata -------------------------------------------------------------------
    def live(self) -> bool:
        return self.get_status("/v2/health/live") == 200

    def ready(self) -> bool:
        return self.get_status("/v2/health/ready") == 200

    def model_ready(self, model: str, version: str = "") -> bool:
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/ready"
        return self.get_status(path) == 200

    def server_metadata(self) -> dict[str, Any]:
        return self.http.get_server_metadata(headers=self.headers)

    def model_metadata(self, model: str) -> dict[str, Any]:
        if model not in self._metadata:
            self._metadata[model] = self.http.get_model_metadata(model, headers=self.headers)
        return self._metadata[model]

    def model_config(self, model: str, fresh: bool = False) -> dict[str, Any]:
        """The effective config as JSON (the server's view, defaults filled in)."""
        if fresh or model not in self._configs:
            self._configs[model] = self.http.get_model_config(model, headers=self.headers)
        return self._configs[model]

    def repository_index(self) -> list[dict[str, Any]]:
        return self.http.get_model_repository_index(headers=self.headers)

    def statistics(self, model: str = "") -> dict[str, Any]:
        return self.http.get_inference_statistics(model, headers=self.headers)

    # -- repository control --------------------------------------------------------------------
    def load(self, model: str, config: dict[str, Any] | None = None) -> None:
        """Load (or reload, when a config override is given) a model; explicit model control only."""
        self.changes += 1
        self.http.load_model(model, headers=self.headers, config=json.dumps(config) if config else None)
        self._forget(model)

    def unload(self, model: str, unload_dependents: bool = False) -> None:
        self.changes += 1
        self.http.unload_model(model, headers=self.headers, unload_dependents=unload_dependents)
        self._forget(model)

    def _forget(self, model: str) -> None:
        self._configs.pop(model, None)
        self._metadata.pop(model, None)

    # -- inference -----------------------------------------------------------------------------
    def synthesize(self, model: str, batch_size: int = 1, rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
        """One request's inputs: the model's next `inputs.data` entries (round-robin) where declared,
        else random values shaped and typed from its metadata and config (within `inputs.ranges`)."""
        data = self.declared.data.get(model)
        entry = self._entries.get(model, 0)
        if data is not None:
            self._entries[model] = (entry + batch_size) % len(data.entries)
        return synthesize_inputs(
            self.model_metadata(model), self.model_config(model), batch_size=batch_size,
            dynamic_dim=self.dynamic_dim, shapes=self.input_shapes.get(model, {}), rng=rng,
            ranges=self.declared.ranges.get(model), data=data, entry=entry,
        )

    def refusal_hint(self, model: str) -> str:
        """After a refused request: which of its inputs were synthesized and how to declare them."""
        return refusal_hint(model, self.model_metadata(model), self.model_config(model),
                            self.declared.data.get(model), self.dynamic_dim)

    def is_sequence_model(self, model: str) -> bool:
        return "sequence_batching" in self.model_config(model)

    def infer(self, model: str, inputs: dict[str, np.ndarray] | None = None, *, protocol: str = "http",
              batch_size: int = 1, sequence_id: int | str = 0, sequence_start: bool = False,
              sequence_end: bool = False, version: str = "") -> InferOutcome:
        """Send one inference; a sequence model without a sequence id gets a one-request sequence."""
        from tritonclient.utils import InferenceServerException

        inputs = inputs if inputs is not None else self.synthesize(model, batch_size)
        if self.is_sequence_model(model) and not sequence_id:
            from ..inputs import string_corrid

            number = int(np.random.default_rng().integers(1, 2**31))
            sequence_id = f"{model}-{number}" if string_corrid(self.model_config(model)) else number
            sequence_start = sequence_end = True
        module = self._module(protocol)
        infer_inputs = []
        for name, array in inputs.items():
            item = module.InferInput(name, list(array.shape), _triton_dtype(array))
            item.set_data_from_numpy(array)
            infer_inputs.append(item)
        client = self.http if protocol == "http" else self.grpc
        started = time.perf_counter()
        try:
            result = client.infer(
                model, infer_inputs, model_version=version, headers=dict(self.headers) or None,  # tritonclient adds to the dict it is given
                sequence_id=sequence_id, sequence_start=sequence_start, sequence_end=sequence_end,
                **({"timeout": int(self.timeout_s * 1e6)} if protocol == "http" else {"client_timeout": self.timeout_s}),
            )
        except InferenceServerException as exc:
            error, refused = exc.message(), not is_timeout(exc)
            if not refused:
                error = unanswered(model, self.timeout_s, self._live_now())
            return InferOutcome(model, False, time.perf_counter() - started, inputs=inputs, error=error, refused=refused)
        except (OSError, ConnectionError) as exc:
            error = (unanswered(model, self.timeout_s, self._live_now()) if is_timeout(exc)
                     else describe_connection_error(self.http_url, exc))
            return InferOutcome(model, False, time.perf_counter() - started, inputs=inputs, error=error)
        latency = time.perf_counter() - started
        response = result.get_response()
        names = [o["name"] for o in response["outputs"]] if isinstance(response, dict) else [o.name for o in response.outputs]
        return InferOutcome(model, True, latency, {n: result.as_numpy(n) for n in names}, inputs)

    def _live_now(self) -> bool:
        """/v2/health/live on a fresh connection (the client's own may still wait on the lost answer)."""
        return http_status(self.http_url + "/v2/health/live", timeout_s=min(self.timeout_s, 5.0)) == 200

    @property
    def grpc(self):
        if self._grpc is None:
            import tritonclient.grpc as grpcclient

            self._grpc = grpcclient.InferenceServerClient(self.grpc_url)
        return self._grpc

    @staticmethod
    def _module(protocol: str):
        if protocol == "grpc":
            import tritonclient.grpc as module
        else:
            import tritonclient.http as module
        return module

    def reconnect(self) -> None:
        """Close every HTTP connection and open a fresh client. Idle keep-alive connections would
        otherwise hold a shutting-down server until its exit timeout."""
        import tritonclient.http as httpclient

        old = self.http
        parts = urlsplit(self.http_url)
        self.http = httpclient.InferenceServerClient(
            parts.netloc, ssl=parts.scheme == "https", connection_timeout=self.timeout_s, network_timeout=self.timeout_s
        )
        old.close()

    def close(self) -> None:
        self.http.close()
        if self._grpc is not None:
            self._grpc.close()


def _triton_dtype(array: np.ndarray) -> str:
    from tritonclient.utils import np_to_triton_dtype

    return np_to_triton_dtype(array.dtype)
