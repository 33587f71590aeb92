"""A stand-in for a Triton server whose data sources are empty, for the unit test that walks the
whole checklist against it: it answers the HTTP health and metadata endpoints (so that a run can
attach; it never says it is ready) and lists the models it is given as READY in its repository
index with their metadata and config (so that requests can be built), and answers nothing else: the
model's ready endpoint and every inference are refused, the metrics endpoint is empty, and gRPC is
a closed port. No check may PASS against it: nothing it serves can be judged."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# One small stateless model, as a live config and metadata describe it.
MODEL_CONFIG = {
    "name": "m", "platform": "", "backend": "python", "max_batch_size": 8,
    "version_policy": {"latest": {"num_versions": 1}},
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": ["4"]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": ["4"]}],
    "instance_group": [{"name": "m_0", "kind": "KIND_CPU", "count": 1}],
    "dynamic_batching": {},
}
MODEL_METADATA = {
    "name": "m", "versions": ["1"], "platform": "python",
    "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 4]}],
}


def _handler(models: dict[str, dict[str, Any]]) -> type[BaseHTTPRequestHandler]:
    class EmptyTriton(BaseHTTPRequestHandler):
        def _send(self, code: int, body: Any = None, content_type: str = "application/json") -> None:
            data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refuse(self) -> None:
            self._send(400, {"error": "this server answers nothing"})

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?")[0].rstrip("/")
            if path == "/v2/health/live":  # enough to attach; the server never says it is ready
                return self._send(200)
            if path == "/v2":
                return self._send(200, {"name": "triton", "version": "2.51.0", "extensions": []})
            if path == "/metrics":
                return self._send(200, b"", "text/plain")
            parts = path.split("/")
            if len(parts) >= 4 and parts[:3] == ["", "v2", "models"] and parts[3] in models:
                tail = [p for p in parts[4:] if p not in ("versions", "1")]
                if tail == []:
                    return self._send(200, {**MODEL_METADATA, "name": parts[3]})
                if tail == ["config"]:
                    return self._send(200, models[parts[3]])
            return self._send(404, {"error": f"unknown path {path}"})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if self.path.split("?")[0] == "/v2/repository/index":
                return self._send(200, [{"name": n, "version": "1", "state": "READY"} for n in models])
            return self._refuse()

        def log_message(self, *args: Any) -> None:
            return None

    return EmptyTriton


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def empty_server(model_names: tuple[str, ...] = ()) -> Iterator[str]:
    """Serve on a free local port; yields the HTTP URL."""
    models = {name: {**MODEL_CONFIG, "name": name} for name in model_names}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(models))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
