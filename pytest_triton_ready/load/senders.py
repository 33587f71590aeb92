"""Transports: send one prebuilt request and say whether it succeeded (and why not).

gRPC sends the request already serialized to Triton's ModelInfer method and leaves the response
unparsed (the status is all a load run needs), over one HTTP/2 connection driven in the traffic's
event loop (load/grpc_h2.py), or grpc.aio for targets only grpcio resolves. HTTP posts the prebuilt
binary-tensor body over a keep-alive connection per request in flight, parsed by httptools
(load/http_pool.py). Both run inside the event loop that owns them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

from .requests import PreparedRequest, RequestPool

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
_NUMBERS = re.compile(r"\b\d+\b")
_MAX_REASON = 160


def error_reason(text: str) -> str:
    """An error message folded into a reason: first line, ids and counts replaced by N, bounded."""
    line = (text or "unknown error").strip().splitlines()[0] if (text or "").strip() else "unknown error"
    return _NUMBERS.sub("N", line)[:_MAX_REASON]


class PublicUnaryCall:
    """ModelInfer through grpc.aio's public multicallable; None on success, else the reason."""

    def __init__(self, multicallable: Any) -> None:
        import grpc

        self._call = multicallable
        self._error = grpc.aio.AioRpcError

    async def __call__(self, body: bytes, timeout_s: float, metadata: tuple | None) -> str | None:
        try:
            await self._call(body, timeout=timeout_s, metadata=metadata)
        except self._error as exc:
            return error_reason(f"{exc.code().name}: {exc.details()}")
        return None


def model_infer_call(channel: Any) -> PublicUnaryCall:
    """ModelInfer on a grpc.aio `channel`, the request already serialized, the response left unparsed."""
    try:
        multicallable = channel.unary_unary(MODEL_INFER, request_serializer=None, response_deserializer=None,
                                            _registered_method=True)
    except TypeError:  # a grpcio without registered methods
        multicallable = channel.unary_unary(MODEL_INFER, request_serializer=None, response_deserializer=None)
    return PublicUnaryCall(multicallable)


class GrpcSender:
    """gRPC to one server; `send` returns None on success, else the error reason. A bare host:port
    goes over the lean HTTP/2 client (load/grpc_h2.py, transport "h2"); any other grpcio target
    (unix:, dns:///, a list), or `transport="grpcio"`, over a grpc.aio channel."""

    protocol = "grpc"

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, timeout_s: float = 30.0,
                 transport: str = "auto") -> None:
        from .grpc_h2 import GrpcChannel, plain_target

        if transport not in ("auto", "h2", "grpcio"):
            raise ValueError(f"transport must be auto, h2 or grpcio, got {transport!r}")
        self.timeout_s = timeout_s
        self._h2: GrpcChannel | None = None
        self._channel: Any = None
        if transport == "h2" or (transport == "auto" and plain_target(url)):
            self._h2 = GrpcChannel(url, headers)
        else:
            import grpc

            options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1),
                       ("grpc.use_local_subchannel_pool", 1)]
            self._channel = grpc.aio.insecure_channel(url, options=options)
            self._call = model_infer_call(self._channel)
            self._metadata = tuple((k.lower(), v) for k, v in (headers or {}).items()) or None

    @property
    def transport(self) -> str:
        """'h2' or 'grpcio': how requests are sent (for tests and benchmarks)."""
        return "h2" if self._h2 is not None else "grpcio"

    async def send(self, pool: RequestPool, request: PreparedRequest, counter: int = 0) -> str | None:
        if self._h2 is not None:
            reason = await self._h2.unary(MODEL_INFER, request.grpc_bytes(counter), self.timeout_s)
            return None if reason is None else error_reason(reason)
        return await self._call(request.grpc_bytes(counter), self.timeout_s, self._metadata)

    async def close(self) -> None:
        if self._h2 is not None:
            await self._h2.close()
        else:
            await self._channel.close()


class HttpSender:
    """HTTP/1.1 with keep-alive, one connection per request in flight (load/http_pool.py), and the
    binary tensor extension; `send` returns None on success, else the error reason."""

    protocol = "http"

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, timeout_s: float = 30.0,
                 connections: int = 64) -> None:
        from .http_pool import HttpPool

        self.base = url.rstrip("/")
        self.timeout_s = timeout_s
        self._pool = HttpPool(self.base, headers, connections)

    async def send(self, pool: RequestPool, request: PreparedRequest, counter: int = 0) -> str | None:
        try:
            status, body = await self._pool.post(pool.http_path, request.http_bytes(counter), request.http_json_size,
                                                 self.timeout_s)
        except asyncio.TimeoutError:
            return "timeout"
        except OSError as exc:
            return error_reason(f"{type(exc).__name__}: {exc}")
        if status == 200:
            return None
        return error_reason(f"HTTP {status}: {_error_text(body)}")

    async def close(self) -> None:
        await self._pool.close()


def _error_text(body: bytes) -> str:
    import json

    try:
        return str(json.loads(body.decode(errors="replace")).get("error", body[:200]))
    except (ValueError, AttributeError):
        return body[:200].decode(errors="replace")


def make_sender(protocol: str, grpc_url: str, http_url: str, headers: Mapping[str, str] | None,
                timeout_s: float, concurrency_hint: int = 64):
    if protocol == "grpc":
        return GrpcSender(grpc_url, headers, timeout_s)
    if protocol == "http":
        return HttpSender(http_url, headers, timeout_s, connections=max(1, concurrency_hint))
    raise ValueError(f"protocol must be grpc or http, got {protocol!r}")
