"""The lean HTTP/2 gRPC client (load/grpc_h2.py) against a real grpc.aio server on loopback: flow
control both ways with messages of a mebibyte, the server's limit on concurrent streams, a server
that goes away (GOAWAY with calls in flight) and one that comes back on the same port, percent-
encoded messages, a refused connection; and, without a server, its header block and its framing of
what a server may send (CONTINUATION, padding, PING, SETTINGS)."""

from __future__ import annotations

import asyncio
import socket

import grpc
import hpack
import pytest

from pytest_triton_ready.load.errors import UNAVAILABLE, classify
from pytest_triton_ready.load.grpc_h2 import (
    CONTINUATION,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    PADDED,
    PING,
    PREFACE,
    SETTINGS,
    GrpcChannel,
    H2Connection,
    frame,
    header_block,
    plain_target,
)
from pytest_triton_ready.load.senders import MODEL_INFER

MIB = 1 << 20


class EchoServer:
    """ModelInfer that answers with the request's bytes; b"slow..." waits 1 s first, b"fail..."
    aborts with a message outside ASCII."""

    def __init__(self, port: int = 0, options: list | None = None) -> None:
        self.port = port
        self.options = options or []
        self.active = 0
        self.most_active = 0
        self.server: grpc.aio.Server | None = None

    async def infer(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        try:
            if request.startswith(b"slow"):
                await asyncio.sleep(1.0)
            if request.startswith(b"fail"):
                await context.abort(grpc.StatusCode.INTERNAL, "modèle en échec: 100% des instances")
            await asyncio.sleep(0.01)
            return request
        finally:
            self.active -= 1

    async def start(self) -> str:
        service, method = MODEL_INFER.strip("/").split("/")
        handler = grpc.method_handlers_generic_handler(service, {
            method: grpc.unary_unary_rpc_method_handler(self.infer)})
        self.server = grpc.aio.server(options=[("grpc.max_receive_message_length", -1),
                                               ("grpc.max_send_message_length", -1), *self.options])
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port(f"127.0.0.1:{self.port}")
        await self.server.start()
        return f"127.0.0.1:{self.port}"

    async def stop(self, grace: float | None = None) -> None:
        await self.server.stop(grace)


def _run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 30))


def test_messages_of_a_mebibyte_each_way_pass_the_windows_of_both_sides():
    async def go():
        server = EchoServer()
        channel = GrpcChannel(await server.start())
        try:
            bodies = [bytes([i]) * (MIB + i) for i in range(4)]
            return await asyncio.gather(*(channel.unary(MODEL_INFER, body, 10) for body in bodies))
        finally:
            await channel.close()
            await server.stop()

    assert _run(go()) == [None] * 4


def test_calls_beyond_the_servers_concurrent_streams_wait_for_a_free_one():
    async def go():
        server = EchoServer(options=[("grpc.max_concurrent_streams", 4)])
        channel = GrpcChannel(await server.start())
        try:
            outcomes = await asyncio.gather(*(channel.unary(MODEL_INFER, b"x", 10) for _ in range(40)))
            return outcomes, server.most_active
        finally:
            await channel.close()
            await server.stop()

    outcomes, most_active = _run(go())
    assert outcomes == [None] * 40
    assert most_active <= 4


def test_a_server_going_away_finishes_the_calls_in_flight_and_the_client_connects_anew_when_it_is_back():
    async def go():
        server = EchoServer()
        target = await server.start()
        channel = GrpcChannel(target)
        try:
            assert await channel.unary(MODEL_INFER, b"x", 5) is None
            in_flight = [asyncio.ensure_future(channel.unary(MODEL_INFER, b"slow", 5)) for _ in range(3)]
            await asyncio.sleep(0.2)
            await server.stop(grace=3)  # GOAWAY, then the calls in flight finish
            finished = await asyncio.gather(*in_flight)
            while_down = await channel.unary(MODEL_INFER, b"x", 5)
            again = EchoServer(port=server.port)
            await again.start()
            try:
                return finished, while_down, await channel.unary(MODEL_INFER, b"x", 5)
            finally:
                await again.stop()
        finally:
            await channel.close()

    finished, while_down, back = _run(go())
    assert finished == [None] * 3
    assert while_down.startswith("UNAVAILABLE: failed to connect to 127.0.0.1:") and classify(while_down) == UNAVAILABLE
    assert back is None


def test_a_percent_encoded_message_reads_as_grpcio_reads_it():
    async def go():
        server = EchoServer()
        target = await server.start()
        channel = GrpcChannel(target)
        try:
            lean = await channel.unary(MODEL_INFER, b"fail", 5)
            async with grpc.aio.insecure_channel(target) as reference:
                call = reference.unary_unary(MODEL_INFER, request_serializer=None, response_deserializer=None)
                try:
                    await call(b"fail", timeout=5)
                except grpc.aio.AioRpcError as exc:
                    return lean, f"{exc.code().name}: {exc.details()}"
        finally:
            await channel.close()
            await server.stop()

    lean, reference = _run(go())
    assert lean == reference == "INTERNAL: modèle en échec: 100% des instances"


def test_a_refused_connection_reads_as_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there

    async def go():
        channel = GrpcChannel(f"127.0.0.1:{port}")
        try:
            return await channel.unary(MODEL_INFER, b"x", 2)
        finally:
            await channel.close()

    reason = _run(go())
    assert reason.startswith(f"UNAVAILABLE: failed to connect to 127.0.0.1:{port} (ConnectionRefusedError")
    assert classify(reason) == UNAVAILABLE


def test_the_header_block_carries_the_call_and_leaves_the_servers_table_alone():
    decoder = hpack.Decoder()
    block = header_block(MODEL_INFER, "triton:8001", 2.5, {"Authorization": "Bearer t"})
    headers = dict(decoder.decode(block))
    assert decoder.decode(block) == decoder.decode(block)
    assert len(decoder.header_table.dynamic_entries) == 0
    assert headers == {":method": "POST", ":scheme": "http", ":path": MODEL_INFER, ":authority": "triton:8001",
                       "content-type": "application/grpc", "te": "trailers", "grpc-timeout": "2500m",
                       "authorization": "Bearer t"}


@pytest.mark.parametrize(("target", "plain"), [("127.0.0.1:8001", True), ("triton.svc:8001", True),
                                               ("[::1]:8001", True), ("dns:///triton:8001", False),
                                               ("unix:/tmp/s", False), ("ipv4:10.0.0.1:8001,10.0.0.2:8001", False),
                                               ("triton", False)])
def test_only_a_bare_host_and_port_is_a_plain_target(target, plain):
    assert plain_target(target) is plain


class Wire:
    """The transport end of an H2Connection: what it wrote."""

    def __init__(self) -> None:
        self.written = bytearray()

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _frames(data: bytes) -> list[tuple[int, int, int, bytes]]:
    assert data.startswith(PREFACE)
    out, at = [], len(PREFACE)
    while at < len(data):
        length = int.from_bytes(data[at:at + 3], "big")
        out.append((data[at + 3], data[at + 4], int.from_bytes(data[at + 5:at + 9], "big"),
                    bytes(data[at + 9:at + 9 + length])))
        at += 9 + length
    return out


def test_headers_split_over_continuation_and_padded_frames_fed_a_byte_at_a_time_finish_the_call():
    async def go():
        connection = H2Connection({0: "OK", 13: "INTERNAL"})
        wire = Wire()
        connection.connection_made(wire)
        first = connection.start(header_block(MODEL_INFER, "t:1", 5), b"a")
        second = connection.start(header_block(MODEL_INFER, "t:1", 5), b"b")
        encoder = hpack.Encoder()  # blocks encoded in the order they are sent: the tables stay in step
        head = encoder.encode([(":status", "200"), ("content-type", "application/grpc")])
        ok = encoder.encode([("grpc-status", "0")])
        head_again = encoder.encode([(":status", "200"), ("content-type", "application/grpc")])
        trailers = encoder.encode([("grpc-status", "13"), ("grpc-message", "bad%20input")])
        answer = (frame(HEADERS, 0, first.id, head[:2]) + frame(CONTINUATION, END_HEADERS, first.id, head[2:])
                  + frame(HEADERS, END_HEADERS | END_STREAM, first.id, ok)
                  + frame(PING, 0, 0, b"12345678") + frame(SETTINGS, 0, 0, (5).to_bytes(2, "big")
                                                             + (32768).to_bytes(4, "big"))
                  + frame(HEADERS, END_HEADERS | PADDED, second.id, bytes([3]) + head_again + b"\0\0\0")
                  + frame(HEADERS, END_HEADERS | END_STREAM, second.id, trailers))
        for i in range(len(answer)):
            connection.data_received(answer[i:i + 1])
        assert connection.lost_reason == ""
        return await first.future, await second.future, connection.max_frame, _frames(bytes(wire.written))

    first, second, max_frame, written = _run(go())
    assert first is None
    assert second == "INTERNAL: bad input"
    assert max_frame == 32768
    assert (PING, 1, 0, b"12345678") in written  # answered
    assert (SETTINGS, 1, 0, b"") in written  # acknowledged
    assert [f[:3] for f in written if f[0] in (HEADERS, 0)] == [
        (HEADERS, END_HEADERS, 1), (0, END_STREAM, 1), (HEADERS, END_HEADERS, 3), (0, END_STREAM, 3)]
