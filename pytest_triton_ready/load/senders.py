"""Transports: send one prebuilt request and say whether it succeeded (and why not).

gRPC goes through a raw grpc.aio unary call on Triton's ModelInfer method (a registered method)
with the request already serialized and the response left unparsed (the status is all a load run
needs). Where the installed grpcio allows it, the call is made on grpc.aio's own Cython call
object (see CoreUnaryCall), which spares the per-request Python wrapper. HTTP posts the prebuilt
binary-tensor body over a keep-alive connection per request in flight, parsed by httptools
(load/http_pool.py). Both run inside the event loop that owns them.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from typing import Any

from .requests import PreparedRequest, RequestPool

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
LOCAL_CANCELLATION = "Locally cancelled by application!"  # grpc.aio's own wording for a cancelled call
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


class CoreUnaryCall:
    """ModelInfer on grpc.aio's Cython call object: what grpc.aio's UnaryUnaryCall does inside
    (call, deadline, metadata, status), without the Task, the Call wrapper and the metadata and
    census objects it builds around every request. Same RPC, same deadline, same status checked,
    same reason on failure; a cancelled request cancels its RPC as grpc.aio does. `of` gives None
    where the installed grpcio lacks the internals this needs; the sender then uses the public call."""

    def __init__(self, core_channel: Any, handle: int) -> None:
        import grpc

        self._core = core_channel
        self._handle = handle
        self._method = MODEL_INFER.encode()
        self._code_names = {code.value[0]: code.name for code in grpc.StatusCode}

    @classmethod
    def of(cls, channel: Any, multicallable: Any) -> CoreUnaryCall | None:
        core = getattr(channel, "_channel", None)
        handle = getattr(multicallable, "_registered_call_handle", None)
        if core is None or not callable(getattr(core, "call", None)) or not isinstance(handle, int):
            return None
        return cls(core, handle)

    async def __call__(self, body: bytes, timeout_s: float, metadata: tuple | None) -> str | None:
        call = self._core.call(self._method, time.time() + timeout_s, None, None, self._handle)
        try:
            await call.unary_unary(body, metadata or (), None)
        except asyncio.CancelledError:
            if not call.done():
                call.cancel(LOCAL_CANCELLATION)
            raise
        if call.is_ok():
            return None
        status = await call.status()
        return error_reason(f"{self._code_names.get(status.code(), status.code())}: {status.details()}")


def model_infer_call(channel: Any, core: bool = True) -> PublicUnaryCall | CoreUnaryCall:
    """The cheapest working ModelInfer call on a grpc.aio `channel` (the public one when `core` is False)."""
    try:
        multicallable = channel.unary_unary(MODEL_INFER, request_serializer=None, response_deserializer=None,
                                            _registered_method=True)
    except TypeError:  # a grpcio without registered methods
        multicallable = channel.unary_unary(MODEL_INFER, request_serializer=None, response_deserializer=None)
    return (CoreUnaryCall.of(channel, multicallable) if core else None) or PublicUnaryCall(multicallable)


class GrpcSender:
    """One gRPC channel per sender; `send` returns None on success, else the error reason."""

    protocol = "grpc"

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, timeout_s: float = 30.0,
                 channels: int = 1, core_calls: bool = True) -> None:
        import grpc

        options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1),
                   ("grpc.use_local_subchannel_pool", 1)]
        self._channels = [grpc.aio.insecure_channel(url, options=options) for _ in range(max(1, channels))]
        self._calls = [model_infer_call(c, core_calls) for c in self._channels]
        self._metadata = tuple((k.lower(), v) for k, v in (headers or {}).items()) or None
        self.timeout_s = timeout_s
        self._next = 0

    @property
    def call_kind(self) -> str:
        """'core' or 'public': how requests are sent (for tests and benchmarks)."""
        return "core" if isinstance(self._calls[0], CoreUnaryCall) else "public"

    async def send(self, pool: RequestPool, request: PreparedRequest, counter: int = 0) -> str | None:
        calls = self._calls
        if len(calls) > 1:
            self._next += 1
            call = calls[self._next % len(calls)]
        else:
            call = calls[0]
        return await call(request.grpc_bytes(counter), self.timeout_s, self._metadata)

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()


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
