"""The load engine's transports without tritonserver: both gRPC transports (the lean HTTP/2 client
and grpc.aio) against a real grpc.aio server on loopback give the same outcome, reason, deadline
and cancellation. The HTTP/2 client's own cases: tests/test_grpc_h2.py; the same senders against
tritonserver: tests/test_load.py."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest

from pytest_triton_ready.load.requests import PreparedRequest, RequestPool
from pytest_triton_ready.load.senders import MODEL_INFER, GrpcSender


class InferStandIn:
    """A gRPC server with Triton's ModelInfer method only, answering by the request's bytes:
    b"ok" succeeds, b"missing" fails NOT_FOUND as Triton does, b"slow" answers after 2 s."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []
        self.cancelled = asyncio.Event()
        self.server: grpc.aio.Server | None = None
        self.url = ""

    async def model_infer(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.metadata.append({k: v for k, v in context.invocation_metadata()})
        if request == b"missing":
            await context.abort(grpc.StatusCode.NOT_FOUND, "Request for unknown model: 'nope' is not found")
        if request == b"slow":
            try:
                await asyncio.sleep(2.0)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        return b""

    async def start(self) -> None:
        service, method = MODEL_INFER.strip("/").split("/")
        handler = grpc.method_handlers_generic_handler(service, {
            method: grpc.unary_unary_rpc_method_handler(self.model_infer)})
        self.server = grpc.aio.server()
        self.server.add_generic_rpc_handlers((handler,))
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.url = f"127.0.0.1:{port}"

    async def stop(self) -> None:
        await self.server.stop(None)


def _pool(body: bytes) -> tuple[RequestPool, PreparedRequest]:
    request = PreparedRequest(body, b"", None)
    return RequestPool("identity", "", 1, (request,)), request


async def _outcomes(transport: str) -> dict:
    server = InferStandIn()
    await server.start()
    sender = GrpcSender(server.url, headers={"Authorization": "Bearer t"}, timeout_s=5.0, transport=transport)
    try:
        outcome = {"kind": sender.transport}
        outcome["ok"] = await sender.send(*_pool(b"ok"))
        outcome["missing"] = await sender.send(*_pool(b"missing"))
        sender.timeout_s = 0.2
        outcome["deadline"] = await sender.send(*_pool(b"slow"))
        sender.timeout_s = 5.0
        in_flight = asyncio.ensure_future(sender.send(*_pool(b"slow")))
        await asyncio.sleep(0.3)
        in_flight.cancel()
        with pytest.raises(asyncio.CancelledError):
            await in_flight
        await asyncio.wait_for(server.cancelled.wait(), 2.0)  # the RPC itself was cancelled
        outcome["server_saw_cancel"] = server.cancelled.is_set()
        outcome["metadata"] = server.metadata[0].get("authorization")
        return outcome
    finally:
        await sender.close()
        await server.stop()


def test_both_grpc_transports_give_the_same_outcome_reason_deadline_and_cancellation():
    lean = asyncio.run(_outcomes("h2"))
    grpcio = asyncio.run(_outcomes("grpcio"))
    assert lean["kind"] == "h2" and grpcio["kind"] == "grpcio"
    expected = {"ok": None, "missing": "NOT_FOUND: Request for unknown model: 'nope' is not found",
                "deadline": "DEADLINE_EXCEEDED: Deadline Exceeded", "server_saw_cancel": True,
                "metadata": "Bearer t"}
    assert {k: v for k, v in lean.items() if k != "kind"} == expected
    assert {k: v for k, v in grpcio.items() if k != "kind"} == expected


@pytest.mark.parametrize(("target", "transport"), [("127.0.0.1:8001", "h2"), ("localhost:8001", "h2"),
                                                   ("[::1]:8001", "h2"), ("dns:///triton:8001", "grpcio"),
                                                   ("unix:/run/triton.sock", "grpcio")])
def test_a_bare_host_and_port_goes_over_the_lean_client_and_any_other_target_over_grpcio(target, transport):
    async def kind() -> str:
        sender = GrpcSender(target)
        try:
            return sender.transport
        finally:
            await sender.close()

    assert asyncio.run(kind()) == transport


def test_a_request_made_unique_changes_only_its_counter_bytes():
    body = np.arange(8, dtype=np.float32).tobytes()
    request = PreparedRequest(b"head" + body, b"", None, grpc_slot=4)
    sent = request.grpc_bytes(7)
    assert sent[:4] == b"head" and sent[8:] == body[4:]
    assert np.frombuffer(sent[4:8], dtype=np.float32)[0] == 7.0
