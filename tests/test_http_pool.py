"""The load engine's HTTP/1.1 client (load/http_pool.py, load/senders.HttpSender) against a real
HTTP/1.1 server on the loopback (the standard library's, in a thread): keep-alive reuse, the head
Triton's binary tensor extension needs, error bodies, a server that closes, one that never answers,
and one that is not there."""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_triton_ready.load import errors
from pytest_triton_ready.load.http_pool import HttpPool
from pytest_triton_ready.load.requests import PreparedRequest, RequestPool
from pytest_triton_ready.load.senders import HttpSender


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, behaviour: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.connections = 0
        self.seen: list[tuple[str, dict[str, str], bytes]] = []

    def process_request(self, request, client_address):
        self.connections += 1
        super().process_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server: _Server = self.server  # type: ignore[assignment]
        server.seen.append((self.path, dict(self.headers), body))
        if server.behaviour == "silent":
            time.sleep(2.0)
            return
        if server.behaviour == "drop":
            self.close_connection = True
            return
        status, answer = (400, b'{"error":"unexpected shape for input \'INPUT0\' 7"}') if server.behaviour == "error" \
            else (200, b'{"model_name":"identity"}')
        self.send_response(status)
        self.send_header("Content-Length", str(len(answer)))
        if server.behaviour == "close":
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(answer)


@pytest.fixture
def server(request):
    made = []

    def start(behaviour: str = "ok") -> _Server:
        server = _Server(behaviour)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
        return server

    yield start
    for server in made:
        server.shutdown()
        server.server_close()


def _url(server: _Server, prefix: str = "") -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{prefix}"


POOL = RequestPool("identity", "", 1, ())
REQUEST = PreparedRequest(b"", b'{"inputs":[]}' + b"\x00" * 16, 13)


def _send(url: str, times: int = 1, timeout_s: float = 5.0, headers=None) -> list[str | None]:
    async def run() -> list[str | None]:
        sender = HttpSender(url, headers, timeout_s, connections=4)
        try:
            return [await sender.send(POOL, REQUEST) for _ in range(times)]
        finally:
            await sender.close()

    return asyncio.run(run())


def test_requests_reuse_one_kept_alive_connection_and_carry_the_binary_tensor_head(server):
    running = server()
    assert _send(_url(running, "/prefix/"), times=20, headers={"Authorization": "Bearer x"}) == [None] * 20
    assert running.connections == 1
    path, headers, body = running.seen[0]
    assert path == "/prefix/v2/models/identity/infer" and body == REQUEST.http_body
    assert headers["Inference-Header-Content-Length"] == "13" and headers["Content-Type"] == "application/octet-stream"
    assert headers["Host"] == f"127.0.0.1:{running.server_address[1]}" and headers["Authorization"] == "Bearer x"


def test_a_server_that_closes_after_each_response_gets_a_new_connection_each_time(server):
    running = server("close")
    assert _send(_url(running), times=5) == [None] * 5
    assert running.connections == 5


def test_an_error_status_is_the_reason_with_the_servers_message(server):
    reason = _send(_url(server("error")))[0]
    assert reason == "HTTP N: unexpected shape for input 'INPUT0' N"  # numbers folded, as every reason's
    assert errors.classify(reason) == errors.MODEL_ERROR


def test_a_server_that_never_answers_is_a_timeout_and_its_connection_is_not_reused(server):
    running = server("silent")
    assert _send(_url(running), times=2, timeout_s=0.3) == ["timeout", "timeout"]
    assert running.connections == 2
    assert errors.classify("timeout") == errors.TIMEOUT


def test_a_connection_closed_without_a_response_and_a_server_not_there_are_unavailable(server):
    dropped = _send(_url(server("drop")))[0]
    assert dropped is not None and errors.classify(dropped) == errors.UNAVAILABLE, dropped
    gone = server()
    url = _url(gone)
    gone.shutdown()
    gone.server_close()
    refused = _send(url)[0]
    assert refused is not None and "refused" in refused.lower() and errors.classify(refused) == errors.UNAVAILABLE


def test_the_pool_never_opens_more_connections_than_its_limit(server):
    running = server()

    async def run() -> int:
        pool = HttpPool(_url(running), limit=3)
        await asyncio.gather(*(pool.post("/v2/models/identity/infer", REQUEST.http_body, 13, 5.0) for _ in range(30)))
        opened = pool.open
        await pool.close()
        return opened

    assert asyncio.run(run()) <= 3 and running.connections <= 3
