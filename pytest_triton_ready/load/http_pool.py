"""A lean HTTP/1.1 client for the load engine: keep-alive connections, one per request in flight,
each an asyncio Protocol whose responses httptools parses (the HTTP parser of uvloop's and
uvicorn's authors). A request is its prebuilt head and body written in one call; the response's
body is kept only when it is an error. What it leaves out against a general client (redirects,
cookies, proxies, chunked uploads) a Triton inference request never needs."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

import httptools


class Connection(asyncio.Protocol):
    """One keep-alive connection; `exchange(data)` writes a whole request and waits for its response."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future | None = None
        self.status = 0
        self.error_body = bytearray()
        self.reusable = True

    # -- asyncio.Protocol ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self._fail(exc or ConnectionResetError("connection reset: the server closed the connection"))

    # -- httptools callbacks ------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.error_body.clear()

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.reusable = self.reusable and self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if self.status != 200:
            self.error_body += body

    def on_message_complete(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(self.status)

    # -- use -----------------------------------------------------------------------------------------
    def exchange(self, data: bytes) -> asyncio.Future:
        """Write `data` (a whole request); the future resolves with the response's status."""
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.waiter

    def _fail(self, exc: BaseException) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.close()


class HttpPool:
    """Keep-alive connections to the server at `url` (http or https, with any path prefix), at
    most `limit` of them; `post(path, body, extra)` sends one request and returns (status, error
    body). Idle connections are reused last-in first-out; a broken one is dropped."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, limit: int = 64) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        self.host = parts.hostname or "localhost"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        default_port = (self.port == 443) if self.tls else (self.port == 80)
        authority = self.host if default_port else f"{self.host}:{self.port}"
        self.common = "".join(f"{k}: {v}\r\n" for k, v in {"Host": authority, **(headers or {})}.items())
        self.idle: list[Connection] = []
        self.open = 0
        self.slots = asyncio.Semaphore(max(1, limit))
        self._heads: dict[tuple[str, int | None, int], bytes] = {}
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if self.tls else None

    def head(self, path: str, json_size: int | None, length: int) -> bytes:
        """The request line and headers of a POST to `path` (built once per shape)."""
        key = (path, json_size, length)
        head = self._heads.get(key)
        if head is None:
            binary = f"Inference-Header-Content-Length: {json_size}\r\n" if json_size is not None else ""
            kind = "application/octet-stream" if json_size is not None else "application/json"
            head = self._heads[key] = (f"POST {self.prefix}{path} HTTP/1.1\r\n{self.common}Content-Type: {kind}\r\n"
                                       f"{binary}Content-Length: {length}\r\n\r\n").encode("latin-1")
        return head

    async def post(self, path: str, body: bytes, json_size: int | None, timeout_s: float) -> tuple[int, bytes]:
        """Send one request; raises asyncio.TimeoutError after `timeout_s`, OSError where the
        connection failed."""
        async with self.slots:
            connection = self.idle.pop() if self.idle else await self._connect()
            loop = asyncio.get_running_loop()
            future = connection.exchange(self.head(path, json_size, len(body)) + body)
            timer = loop.call_later(timeout_s, _expire, future)
            try:
                status = await future
            except BaseException:
                self._drop(connection)
                raise
            finally:
                timer.cancel()
            error = bytes(connection.error_body) if status != 200 else b""
            if connection.reusable:
                self.idle.append(connection)
            else:
                self._drop(connection)
            return status, error

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(Connection, self.host, self.port, ssl=self._ssl,
                                                         server_hostname=self.host if self.tls else None)
        except OSError as exc:
            raise ConnectionError(f"failed to connect to {self.host}:{self.port} ({type(exc).__name__}: {exc})") from exc
        self.open += 1
        return connection

    def _drop(self, connection: Connection) -> None:
        connection.close()
        self.open -= 1

    async def close(self) -> None:
        for connection in self.idle:
            connection.close()
        self.idle.clear()
        self.open = 0


def _expire(future: asyncio.Future) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError())


__all__ = ["Connection", "HttpPool"]
