"""A lean gRPC client for the load engine's unary calls: one HTTP/2 connection (cleartext, as
Triton serves gRPC) carries every request in flight, as an asyncio Protocol in the traffic's own
event loop: no poller thread, no call objects, one write for the requests a loop turn made.

A request is its header block, built once (HPACK literals that leave the server's table as it
was, so the same bytes serve every request), and its message, written as one HEADERS and one
DATA frame. Responses are framed here and their header blocks decoded by hpack; a block that
left the decoder's table unchanged is remembered, so the server's repeated answers cost a
lookup. The connection honours the server's SETTINGS (frame size, windows, concurrent streams),
both directions of flow control, PING, GOAWAY and RST_STREAM; a stream the server refused
unprocessed is sent once more on a fresh connection, as grpcio does. What it leaves out against
grpcio (TLS, compression, name resolution beyond host:port, balancing, retry policies) a load
run against one cleartext address never needs: GrpcSender uses grpcio for any other target.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import Mapping
from urllib.parse import unquote

import hpack

from ..errors import TritonReadyError

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 5, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20
MAX_WINDOW = (1 << 31) - 1
DEFAULT_WINDOW = 65_535
DEFAULT_FRAME = 16_384
REPLENISH = 1 << 24  # receive window given back once this much arrived
LAST_STREAM_ID = (1 << 31) - 1
# RST_STREAM codes as grpcio reports them (gRPC over HTTP/2, "Errors")
RST_CODES = {0: "INTERNAL", 1: "INTERNAL", 2: "INTERNAL", 3: "INTERNAL", 4: "INTERNAL", 5: "INTERNAL",
             6: "INTERNAL", 7: "UNAVAILABLE", 8: "CANCELLED", 9: "INTERNAL", 10: "INTERNAL",
             11: "RESOURCE_EXHAUSTED", 12: "PERMISSION_DENIED", 13: "INTERNAL"}
# An HTTP status in place of 200, as grpcio maps it (gRPC's http-grpc-status-mapping)
HTTP_CODES = {400: "INTERNAL", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "UNIMPLEMENTED",
              429: "UNAVAILABLE", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "UNAVAILABLE"}
REFUSED_STREAM = 7
REFUSED_ATTEMPTS = 32  # a stream refused unprocessed is sent again, within its deadline, up to this often
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED: Deadline Exceeded"  # grpcio's words
CANCEL = 8
_FRAME = struct.Struct(">HBBBL")  # length as 16 + 8 bits, type, flags, stream id
_U32 = struct.Struct(">L")


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    length = len(payload)
    return _FRAME.pack(length >> 8, length & 0xFF, kind, flags, stream) + payload


def header_block(path: str, authority: str, timeout_s: float, metadata: Mapping[str, str] | None = None) -> bytes:
    """The request headers of one unary call, as HPACK that adds nothing to the server's table."""
    headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", authority),
               ("content-type", "application/grpc"), ("te", "trailers"),
               ("grpc-timeout", f"{max(1, round(timeout_s * 1000))}m"),
               *((k.lower(), v) for k, v in (metadata or {}).items())]
    return hpack.Encoder().encode([hpack.NeverIndexedHeaderTuple(k, v) for k, v in headers], huffman=True)


class Refused(TritonReadyError):
    """The server took the stream unprocessed (GOAWAY past it, or REFUSED_STREAM): safe to send again."""


class Stream:
    __slots__ = ("id", "future", "window", "status", "trailers_seen")

    def __init__(self, stream_id: int, future: asyncio.Future, window: int) -> None:
        self.id = stream_id
        self.future = future
        self.window = window
        self.status: bytes | None = None  # :status of the response headers
        self.trailers_seen = False


class H2Connection(asyncio.Protocol):
    """One HTTP/2 connection; `start(block, message)` sends a call and gives its Stream, whose
    future resolves to None (grpc-status 0) or the failure's reason "CODE: message"."""

    def __init__(self, code_names: Mapping[int, str]) -> None:
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_event_loop()
        self.code_names = code_names
        self.streams: dict[int, Stream] = {}
        self.next_id = 1
        self.usable = True  # False after GOAWAY, a lost connection or ids running out
        self.closed = False
        self.lost_reason = ""
        self.send_window = DEFAULT_WINDOW  # the connection's
        self.initial_window = DEFAULT_WINDOW  # each new stream's, from the server's SETTINGS
        self.max_frame = DEFAULT_FRAME
        self.max_streams = LAST_STREAM_ID
        self.received = 0
        self.decoder = hpack.Decoder()
        self.blocks: dict[bytes, list] = {}  # header blocks that leave the decoder's table as it was
        self.buffer = b""
        self.continuing: tuple[int, int, bytearray] | None = None  # (stream, flags, block) until END_HEADERS
        self.out: list[bytes] = []
        self.flush_soon = False
        self.blocked: deque[tuple[Stream, memoryview]] = deque()  # DATA waiting for flow-control window
        self.slot_waiters: deque[asyncio.Future] = deque()
        self.settled = self.loop.create_future()  # the server's first SETTINGS arrived: its limits are known

    # -- asyncio.Protocol ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        settings = b"".join(struct.pack(">HL", k, v) for k, v in ((2, 0), (4, MAX_WINDOW)))  # no push, big windows
        transport.write(PREFACE + frame(SETTINGS, 0, 0, settings)  # type: ignore[attr-defined]
                        + frame(WINDOW_UPDATE, 0, 0, _U32.pack(MAX_WINDOW - DEFAULT_WINDOW)))

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        self.closed = True
        why = f"{type(exc).__name__}: {exc}" if exc else "the server closed the connection"
        self.lost_reason = self.lost_reason or f"UNAVAILABLE: socket closed ({why})"
        for stream in list(self.streams.values()):
            self.finish(stream, self.lost_reason)
        if not self.settled.done():
            self.settled.set_exception(ConnectionResetError(f"the connection closed before the server's SETTINGS ({why})"))
        self.blocked.clear()
        self.release_waiters()

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        end, size = 0, len(buffer)
        try:
            while size - end >= 9:
                length = int.from_bytes(buffer[end:end + 3], "big")
                start = end + 9
                if start + length > size:
                    break
                kind, flags = buffer[end + 3], buffer[end + 4]
                stream_id = _U32.unpack_from(buffer, end + 5)[0] & LAST_STREAM_ID
                end = start + length
                if kind == DATA:
                    self.on_data(stream_id, flags, length)
                elif kind == HEADERS or kind == CONTINUATION:
                    self.on_headers(kind, stream_id, flags, buffer[start:end])
                else:
                    self.on_control(kind, stream_id, flags, buffer[start:end])
        except (hpack.HPACKError, ValueError, IndexError, struct.error) as exc:
            self.abort(f"INTERNAL: malformed HTTP/2 from the server ({type(exc).__name__}: {exc})")
            return
        self.buffer = buffer[end:]
        if self.out:
            self.flush()

    # -- frames in ------------------------------------------------------------------------------------
    def on_data(self, stream_id: int, flags: int, length: int) -> None:
        self.received += length
        if self.received >= REPLENISH:
            self.out.append(frame(WINDOW_UPDATE, 0, 0, _U32.pack(self.received)))
            self.received = 0
        stream = self.streams.get(stream_id)
        if stream is not None and flags & END_STREAM:  # a response without trailers
            self.finish(stream, self.http_reason(stream.status) or "INTERNAL: the server ended the stream "
                                                                   "without a grpc-status")

    def on_headers(self, kind: int, stream_id: int, flags: int, payload: bytes) -> None:
        if kind == HEADERS:
            if flags & PADDED:
                payload = payload[1:len(payload) - payload[0]]
            if flags & PRIORITY:
                payload = payload[5:]
            if not flags & END_HEADERS:
                self.continuing = (stream_id, flags, bytearray(payload))
                return
        else:
            if self.continuing is None or self.continuing[0] != stream_id:
                raise ValueError("CONTINUATION without HEADERS")
            self.continuing[2].extend(payload)
            if not flags & END_HEADERS:
                return
            stream_id, flags, block = self.continuing
            payload, self.continuing = bytes(block), None
        headers = self.decode(payload)
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        status = grpc_status = message = None
        for name, value in headers:
            if name == b":status":
                status = value
            elif name == b"grpc-status":
                grpc_status = value
            elif name == b"grpc-message":
                message = value
        if status is not None:
            stream.status = status
        if grpc_status is not None:
            stream.trailers_seen = True
            if grpc_status == b"0":
                self.finish(stream, None)
            else:
                code = int(grpc_status)
                text = unquote(message.decode("utf-8", "replace")) if message else ""
                self.finish(stream, f"{self.code_names.get(code, code)}: {text}")
        elif flags & END_STREAM:
            self.finish(stream, self.http_reason(stream.status) or "INTERNAL: the server ended the stream "
                                                                   "without a grpc-status")

    def decode(self, block: bytes) -> list:
        known = self.blocks.get(block)
        if known is not None:
            return known
        table = self.decoder.header_table
        before = (len(table.dynamic_entries), table.dynamic_entries[0] if table.dynamic_entries else None,
                  table.maxsize)
        headers = self.decoder.decode(block, raw=True)
        after = (len(table.dynamic_entries), table.dynamic_entries[0] if table.dynamic_entries else None,
                 table.maxsize)
        if before[0] == after[0] and before[1] is after[1] and before[2] == after[2]:
            if len(self.blocks) >= 256:
                self.blocks.clear()
            self.blocks[block] = headers
        else:
            self.blocks.clear()  # the table moved: remembered blocks may point elsewhere now
        return headers

    def on_control(self, kind: int, stream_id: int, flags: int, payload: bytes) -> None:
        if kind == SETTINGS:
            if not flags & ACK:
                for at in range(0, len(payload) - 5, 6):
                    key, value = struct.unpack_from(">HL", payload, at)
                    if key == 3:
                        self.max_streams = value
                    elif key == 4:
                        for stream in self.streams.values():
                            stream.window += value - self.initial_window
                        self.initial_window = value
                    elif key == 5:
                        self.max_frame = value
                self.out.append(frame(SETTINGS, ACK, 0))
                if not self.settled.done():
                    self.settled.set_result(None)
                self.send_blocked()
                self.release_waiters()
        elif kind == PING:
            if not flags & ACK:
                self.out.append(frame(PING, ACK, 0, payload))
        elif kind == WINDOW_UPDATE:
            increment = _U32.unpack(payload)[0] & LAST_STREAM_ID
            if stream_id == 0:
                self.send_window += increment
            elif stream_id in self.streams:
                self.streams[stream_id].window += increment
            self.send_blocked()
        elif kind == RST_STREAM:
            stream = self.streams.get(stream_id)
            if stream is not None:
                code = _U32.unpack(payload)[0]
                if code == REFUSED_STREAM:
                    self.finish(stream, Refused("the server refused the stream"))
                else:
                    self.finish(stream, f"{RST_CODES.get(code, 'INTERNAL')}: the server reset the stream "
                                        f"(RST_STREAM code {code})")
        elif kind == GOAWAY:
            last, code = struct.unpack_from(">LL", payload)
            last &= LAST_STREAM_ID
            self.usable = False
            debug = payload[8:].decode("utf-8", "replace")
            for stream in [s for sid, s in self.streams.items() if sid > last]:
                self.finish(stream, Refused(f"GOAWAY code {code}: {debug}"))
            self.lost_reason = f"UNAVAILABLE: the server is going away (GOAWAY code {code}{': ' + debug if debug else ''})"
            if not self.streams:
                self.close()
        elif kind == PUSH_PROMISE:
            self.abort("INTERNAL: the server pushed a stream it was told not to")

    def http_reason(self, status: bytes | None) -> str | None:
        if status is None or status == b"200":
            return None
        code = int(status)
        return f"{HTTP_CODES.get(code, 'UNKNOWN')}: HTTP status {code} from the server"

    # -- calls out ------------------------------------------------------------------------------------
    def start(self, block: bytes, message: bytes) -> Stream:
        """Send one unary call: `block` from header_block, `message` a serialized request."""
        stream_id = self.next_id
        self.next_id += 2
        if self.next_id > LAST_STREAM_ID:
            self.usable = False
        stream = Stream(stream_id, self.loop.create_future(), self.initial_window)
        self.streams[stream_id] = stream
        out = self.out
        limit = self.max_frame
        if len(block) <= limit:
            out.append(frame(HEADERS, END_HEADERS, stream_id, block))
        else:
            pieces = [block[i:i + limit] for i in range(0, len(block), limit)]
            out.append(frame(HEADERS, 0, stream_id, pieces[0]))
            out.extend(frame(CONTINUATION, END_HEADERS if i == len(pieces) - 1 else 0, stream_id, piece)
                       for i, piece in enumerate(pieces[1:], 1))
        data = b"\x00" + len(message).to_bytes(4, "big") + message
        size = len(data)
        if size <= limit and size <= self.send_window and size <= stream.window and not self.blocked:
            self.send_window -= size
            stream.window -= size
            out.append(frame(DATA, END_STREAM, stream_id, data))
        else:
            self.blocked.append((stream, memoryview(data)))
            self.send_blocked()
        if not self.flush_soon:
            self.flush_soon = True
            self.loop.call_soon(self.flush)
        return stream

    def send_blocked(self) -> None:
        """DATA held back by flow control, sent as far as the windows allow, in order."""
        while self.blocked:
            stream, rest = self.blocked[0]
            if stream.future.done():  # reset or expired meanwhile
                self.blocked.popleft()
                continue
            room = min(self.send_window, stream.window, self.max_frame)
            if room <= 0:
                return
            piece = rest[:room]
            last = len(piece) == len(rest)
            self.send_window -= len(piece)
            stream.window -= len(piece)
            self.out.append(frame(DATA, END_STREAM if last else 0, stream.id, bytes(piece)))
            if last:
                self.blocked.popleft()
            else:
                self.blocked[0] = (stream, rest[len(piece):])

    def flush(self) -> None:
        self.flush_soon = False
        if self.out and self.transport is not None and not self.closed:
            self.transport.write(b"".join(self.out))
        self.out.clear()

    def finish(self, stream: Stream, outcome: str | Exception | None) -> None:
        if self.streams.pop(stream.id, None) is None:
            return
        if not stream.future.done():
            if isinstance(outcome, Exception):
                stream.future.set_exception(outcome)
            else:
                stream.future.set_result(outcome)
        if self.slot_waiters:
            self.release_waiters()
        if not self.usable and not self.streams and not self.closed:
            self.close()

    def cancel(self, stream: Stream, reason: str | None = None) -> None:
        """Give up on a call (cancelled, or past its deadline): RST_STREAM CANCEL to the server."""
        if stream.id in self.streams:
            self.finish(stream, reason)
            self.out.append(frame(RST_STREAM, 0, stream.id, _U32.pack(CANCEL)))
            self.flush()

    # -- room for one more stream --------------------------------------------------------------------
    def has_room(self) -> bool:
        return len(self.streams) < self.max_streams

    def wait_for_room(self) -> asyncio.Future:
        waiter = self.loop.create_future()
        self.slot_waiters.append(waiter)
        return waiter

    def release_waiters(self) -> None:
        while self.slot_waiters and (self.closed or self.has_room()):
            waiter = self.slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                if not self.closed:
                    return

    def abort(self, reason: str) -> None:
        self.lost_reason = reason
        self.usable = False
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        self.usable = False
        if self.transport is not None and not self.closed:
            self.flush()
            self.transport.close()


class GrpcChannel:
    """Unary gRPC calls to one host:port over an H2Connection, opened on first use and opened
    anew once the server closed or retired it. `unary(path, message, timeout_s)` gives None on
    success, else the reason, worded as grpcio's (CODE: details)."""

    def __init__(self, target: str, metadata: Mapping[str, str] | None = None) -> None:
        host, _, port = target.rpartition(":")
        self.host = host.strip("[]") or "localhost"
        self.port = int(port)
        self.authority = target
        self.metadata = dict(metadata or {})
        self.connection: H2Connection | None = None
        self.connecting: asyncio.Task | None = None
        self.blocks: dict[tuple[str, float], bytes] = {}
        import grpc

        self.code_names = {code.value[0]: code.name for code in grpc.StatusCode}

    def block(self, path: str, timeout_s: float) -> bytes:
        key = (path, timeout_s)
        block = self.blocks.get(key)
        if block is None:
            block = self.blocks[key] = header_block(path, self.authority, timeout_s, self.metadata)
        return block

    async def unary(self, path: str, message: bytes, timeout_s: float) -> str | None:
        block = self.block(path, timeout_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        refused = None
        for _ in range(REFUSED_ATTEMPTS):
            connection = self.connection
            if connection is None or not connection.usable:
                try:
                    connection = await asyncio.wait_for(asyncio.shield(self.connect()), deadline - loop.time())
                except asyncio.TimeoutError:
                    return DEADLINE_EXCEEDED
                except OSError as exc:
                    return f"UNAVAILABLE: failed to connect to {self.authority} ({type(exc).__name__}: {exc})"
            while not connection.has_room() and not connection.closed:
                await connection.wait_for_room()
            if connection.closed:
                continue  # it closed while this call waited for a stream: a new one
            stream = connection.start(block, message)
            timer = loop.call_at(deadline, connection.cancel, stream, DEADLINE_EXCEEDED)
            try:
                return await stream.future
            except Refused as exc:  # never processed: sent again once a stream of ours has ended,
                refused = exc       # by when the server has let go of its own count of them
                if connection.streams and not connection.closed:
                    await connection.wait_for_room()
            except asyncio.CancelledError:
                connection.cancel(stream)
                raise
            finally:
                timer.cancel()
        return f"UNAVAILABLE: the server refused the stream {REFUSED_ATTEMPTS} times ({refused})"

    def connect(self) -> asyncio.Task:
        if self.connecting is None or self.connecting.done():
            self.connecting = asyncio.ensure_future(self.open())
        return self.connecting

    async def open(self) -> H2Connection:
        """A new connection, once the server's SETTINGS (its limits) have arrived."""
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(lambda: H2Connection(self.code_names), self.host, self.port)
        try:
            await connection.settled
        except BaseException:
            connection.abort("UNAVAILABLE: no SETTINGS from the server")
            raise
        self.connection = connection
        return connection

    async def close(self) -> None:
        if self.connecting is not None and not self.connecting.done():
            self.connecting.cancel()
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def plain_target(target: str) -> bool:
    """Whether `target` is a bare host:port (what GrpcChannel serves), not a grpcio URI."""
    host, _, port = target.rpartition(":")
    return bool(host) and port.isdigit() and "/" not in target and "," not in target and not host.startswith(
        ("unix", "dns", "ipv4", "ipv6", "vsock"))


__all__ = ["GrpcChannel", "H2Connection", "header_block", "plain_target"]
