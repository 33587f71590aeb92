"""Transports: send one prebuilt request and say whether it succeeded (and why not).

gRPC goes through a raw grpc.aio unary call on Triton's ModelInfer method with the request already
serialized and the response left unparsed (the status is all a load run needs). HTTP posts the
prebuilt binary-tensor body with aiohttp. Both run inside the event loop that owns them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping

from .requests import PreparedRequest, RequestPool

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
_NUMBERS = re.compile(r"\b\d+\b")
_MAX_REASON = 160


def error_reason(text: str) -> str:
    """An error message folded into a reason: first line, ids and counts replaced by N, bounded."""
    line = (text or "unknown error").strip().splitlines()[0] if (text or "").strip() else "unknown error"
    return _NUMBERS.sub("N", line)[:_MAX_REASON]


class GrpcSender:
    """One gRPC channel per sender; `send` returns None on success, else the error reason."""

    protocol = "grpc"

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, timeout_s: float = 30.0,
                 channels: int = 1) -> None:
        import grpc

        self._grpc = grpc
        options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1),
                   ("grpc.use_local_subchannel_pool", 1)]
        self._channels = [grpc.aio.insecure_channel(url, options=options) for _ in range(max(1, channels))]
        self._calls = [c.unary_unary(MODEL_INFER, request_serializer=None, response_deserializer=None)
                       for c in self._channels]
        self._metadata = tuple((k.lower(), v) for k, v in (headers or {}).items()) or None
        self.timeout_s = timeout_s
        self._next = 0

    async def send(self, pool: RequestPool, request: PreparedRequest, counter: int = 0) -> str | None:
        self._next += 1
        call = self._calls[self._next % len(self._calls)]
        try:
            await call(request.grpc_bytes(counter), timeout=self.timeout_s, metadata=self._metadata)
        except self._grpc.aio.AioRpcError as exc:
            return error_reason(f"{exc.code().name}: {exc.details()}")
        return None

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()


class HttpSender:
    """HTTP/1.1 with keep-alive (aiohttp) and the binary tensor extension."""

    protocol = "http"

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, timeout_s: float = 30.0,
                 connections: int = 64) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self.base = url.rstrip("/")
        self.headers = dict(headers or {})
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections), timeout=aiohttp.ClientTimeout(total=timeout_s),
        )

    async def send(self, pool: RequestPool, request: PreparedRequest, counter: int = 0) -> str | None:
        headers = dict(self.headers)
        if request.http_json_size is not None:
            headers["Inference-Header-Content-Length"] = str(request.http_json_size)
        try:
            async with self._session.post(self.base + pool.http_path, data=request.http_bytes(counter), headers=headers) as response:
                body = await response.read()
                if response.status == 200:
                    return None
                return error_reason(f"HTTP {response.status}: {_error_text(body)}")
        except asyncio.TimeoutError:
            return "timeout"
        except self._aiohttp.ClientError as exc:
            return error_reason(f"{type(exc).__name__}: {exc}")

    async def close(self) -> None:
        await self._session.close()


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
