"""One streamed request at a time, on its own stream, for correctness checks: a request built
from a prompt, one of exactly given tensors, or any prebuilt (well-formed or not) request; the
record says what came back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .requests import StreamingPlan, build_request
from .stats import RequestRecord
from .traffic import StreamingLoad, UserStream


def stream_once(grpc_url: str, plan: StreamingPlan, prompt: str, max_tokens: int, *, timeout_s: float = 30.0,
                headers: Mapping[str, str] | None = None, version: str | None = None) -> RequestRecord:
    """Send one request on its own stream and wait for its final response (or the timeout); the
    record keeps the decoded tokens of a BYTES token output. `version`: that version of the model."""
    load = StreamingLoad(grpc_url, plan, concurrency=1, duration_s=None, deadline_s=timeout_s,
                         prompts=lambda n: (prompt, max_tokens), keep_records=1, keep_text=True, headers=headers,
                         version=version)
    request, rec = load._new_request(0, time.monotonic())
    return send_request(grpc_url, request, plan.token_output, timeout_s=timeout_s, headers=headers, record=rec,
                        declared_outputs=plan.outputs, batched=plan.batched)


def stream_arrays(grpc_url: str, plan: StreamingPlan, arrays: Mapping[str, np.ndarray], request_id: str, *,
                  timeout_s: float = 30.0, headers: Mapping[str, str] | None = None) -> RequestRecord:
    """Send one request of exactly these tensors on its own stream (the same tensors can be sent
    twice to compare the answers); the record keeps every output decoded by its datatype."""
    request = build_request(plan.model, arrays, request_id)
    return send_request(grpc_url, request, plan.token_output, timeout_s=timeout_s, headers=headers,
                        declared_outputs=plan.outputs, batched=plan.batched)


def answer_values(record: RequestRecord) -> dict[str, np.ndarray]:
    """Each output of a streamed answer: its values over all responses, concatenated."""
    return {name: np.concatenate([v.reshape(-1) for v in parts]) for name, parts in record.values.items() if parts}


def send_request(grpc_url: str, request: Any, token_output: str, *, timeout_s: float = 30.0,
                 headers: Mapping[str, str] | None = None, record: RequestRecord | None = None,
                 declared_outputs: list[Mapping[str, Any]] | None = None, batched: bool = False) -> RequestRecord:
    """Send one prebuilt ModelInferRequest on its own stream and wait for its final response, an
    error, or the timeout (then neither `final` nor `error` is set). Any request, well-formed or
    not: the record says what came back (tokens, text of a BYTES token output, the error)."""
    metadata = tuple((k.lower(), v) for k, v in (headers or {}).items())
    rec = record or RequestRecord(request.id or "r0", 0, time.monotonic())
    if not request.id:
        request.id = rec.id

    async def one() -> RequestRecord:
        import grpc
        from tritonclient.grpc import service_pb2_grpc

        options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        async with grpc.aio.insecure_channel(grpc_url, options=options) as channel:
            stream = UserStream(service_pb2_grpc.GRPCInferenceServiceStub(channel), 0, metadata, token_output, True,
                             declared_outputs, batched)
            rec.start = time.monotonic()
            future = await stream.send(request, rec)
            try:
                await asyncio.wait_for(asyncio.shield(future), timeout_s)
            except asyncio.TimeoutError:
                stream.forget(rec)  # no final response in time: neither final nor an error
                rec.error = None
            await stream.close(cancel=True)
            return rec

    from ..background import shared_loop

    return asyncio.run_coroutine_threadsafe(one(), shared_loop()).result()
