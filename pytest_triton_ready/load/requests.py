"""Prebuilt requests: a pool of random inputs per model, serialized once before the load starts,
so that sending costs the client nothing but the transport.

gRPC requests are `ModelInferRequest` protobufs (tritonclient's service_pb2) kept as bytes; HTTP
requests are bodies with the binary tensor extension (JSON header, then raw tensor bytes). Each
pool entry has different random inputs, so a response cache cannot answer in the model's place.
A sequence model gets one-request sequences (start and end set) with distinct correlation ids.
A model with the response cache on gets unique inputs on every request: the first four bytes of
its first numeric input carry a request counter (as that input's dtype where it is float32, else
raw bytes), spliced into the serialized request, so the cache is measured missing, not hitting.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_POOL_SIZE = 64


@dataclass(frozen=True)
class PreparedRequest:
    grpc: bytes
    http_body: bytes
    http_json_size: int | None
    grpc_slot: int = -1  # offset of the 4 bytes that make the request unique; -1: sent as is
    http_slot: int = -1

    def grpc_bytes(self, counter: int) -> bytes:
        if self.grpc_slot < 0:
            return self.grpc
        return _splice(self.grpc, self.grpc_slot, counter)

    def http_bytes(self, counter: int) -> bytes:
        if self.http_slot < 0:
            return self.http_body
        return _splice(self.http_body, self.http_slot, counter)


def _splice(data: bytes, offset: int, counter: int) -> bytes:
    return data[:offset] + struct.pack("<f", float(counter % (1 << 24))) + data[offset + 4:]


@dataclass(frozen=True)
class RequestPool:
    """Serialized requests for one model; `take(i)` cycles through them."""

    model: str
    version: str
    batch_size: int
    requests: tuple[PreparedRequest, ...]
    unique: bool = False  # every request made unique (response cache on)

    def take(self, i: int) -> PreparedRequest:
        return self.requests[i % len(self.requests)]

    @property
    def http_path(self) -> str:
        version = f"/versions/{self.version}" if self.version else ""
        return f"/v2/models/{self.model}{version}/infer"


def build_pool(client: Any, model: str, *, batch_size: int = 1, size: int = DEFAULT_POOL_SIZE,
               version: str = "", seed: int | None = None, inputs: list[Mapping[str, np.ndarray]] | None = None) -> RequestPool:
    """A pool of `size` prebuilt requests with random inputs synthesized from the model's metadata
    (through the TritonClient `client`), or the given `inputs` dictionaries."""
    rng = np.random.default_rng(seed)
    sequence = client.is_sequence_model(model)
    cached = bool(client.model_config(model).get("response_cache", {}).get("enable"))
    samples = inputs or [client.synthesize(model, batch_size, rng=rng) for _ in range(size)]
    prepared = []
    for sample in samples:
        sequence_id = int(rng.integers(1, 2**62)) if sequence else 0
        grpc = grpc_request(model, sample, version=version, sequence_id=sequence_id)
        body, json_size = http_request(sample, sequence_id=sequence_id)
        slots = _unique_slots(sample, grpc, body) if cached else (-1, -1)
        prepared.append(PreparedRequest(grpc, body, json_size, *slots))
    return RequestPool(model, version, batch_size, tuple(prepared), unique=cached)


def _unique_slots(sample: Mapping[str, np.ndarray], grpc: bytes, body: bytes) -> tuple[int, int]:
    """Where the first numeric input's first 4 bytes sit in each serialized request."""
    for array in sample.values():
        raw = np.ascontiguousarray(array).tobytes()
        if array.dtype != np.object_ and len(raw) >= 4 and grpc.count(raw) == 1 and body.count(raw) == 1:
            return grpc.index(raw), body.index(raw)
    return -1, -1


def grpc_request(model: str, inputs: Mapping[str, np.ndarray], *, version: str = "", sequence_id: int = 0) -> bytes:
    """One serialized ModelInferRequest with raw (binary) input contents."""
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import np_to_triton_dtype, serialize_byte_tensor

    request = service_pb2.ModelInferRequest(model_name=model, model_version=version)
    for name, array in inputs.items():
        tensor = request.inputs.add()
        tensor.name = name
        tensor.datatype = np_to_triton_dtype(array.dtype)
        tensor.shape.extend(array.shape)
        if tensor.datatype == "BYTES":
            serialized = serialize_byte_tensor(array)
            request.raw_input_contents.append(serialized.item() if serialized.size else b"")
        else:
            request.raw_input_contents.append(np.ascontiguousarray(array).tobytes())
    if sequence_id:
        request.parameters["sequence_id"].int64_param = sequence_id
        request.parameters["sequence_start"].bool_param = True
        request.parameters["sequence_end"].bool_param = True
    return request.SerializeToString()


def http_request(inputs: Mapping[str, np.ndarray], *, sequence_id: int = 0) -> tuple[bytes, int | None]:
    """(body, JSON header size) of one HTTP request using the binary tensor extension."""
    import tritonclient.http as httpclient
    from tritonclient.utils import np_to_triton_dtype

    items = []
    for name, array in inputs.items():
        item = httpclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        item.set_data_from_numpy(array, binary_data=True)
        items.append(item)
    outputs = None
    body, json_size = httpclient.InferenceServerClient.generate_request_body(
        items, outputs=outputs, sequence_id=sequence_id, sequence_start=bool(sequence_id),
        sequence_end=bool(sequence_id),
    )
    return (body.encode() if isinstance(body, str) else body), json_size
