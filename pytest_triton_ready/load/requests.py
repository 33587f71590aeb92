"""Prebuilt requests: a pool of random inputs per model, serialized once before the load starts,
so that sending costs the client nothing but the transport.

gRPC requests are `ModelInferRequest` protobufs (tritonclient's service_pb2) kept as bytes; HTTP
requests are bodies with the binary tensor extension (JSON header, then raw tensor bytes). Each
pool entry has different random inputs, so a response cache cannot answer in the model's place.
A sequence model gets real sequences (see SequencePlan): START, middle steps, END on one
correlation id (numeric, or a string where the config's CORRID control is TYPE_STRING), each
sequence's steps from a stream of the model's `inputs.data` file or `inputs.sequence_length`
synthesized steps; its requests are built when sent, since each playback needs its own id.
A model with the response cache on gets unique inputs on every request: the first four bytes of
its first numeric input carry a request counter (as that input's dtype where it is float32, else
raw bytes), spliced into the serialized request, so the cache is measured missing, not hitting.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..inputs import string_corrid

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
    sequences: SequencePlan | None = None  # a sequence model: whole sequences, built when sent

    def take(self, i: int) -> PreparedRequest:
        return self.requests[i % len(self.requests)]

    @property
    def http_path(self) -> str:
        version = f"/versions/{self.version}" if self.version else ""
        return f"/v2/models/{self.model}{version}/infer"


@dataclass
class SequencePlan:
    """How a sequence model is driven: the steps of each sequence, how many sequences may be live
    at once (`max_candidate_sequences` for the oldest strategy, the direct strategy's slots:
    max_batch_size x instances), and the correlation id's kind."""

    model: str
    version: str
    steps: tuple[tuple[Mapping[str, np.ndarray], ...], ...]
    live: int
    string_ids: bool = False
    strategy: str = "direct"
    _numbers: Any = field(default_factory=itertools.count, repr=False)

    def correlation_id(self, base: int) -> int | str:
        """A fresh id for the next sequence played (unique across runs by `base`)."""
        n = next(self._numbers)
        return f"{self.model}-{base}-{n}" if self.string_ids else (base << 32) + n + 1

    def request(self, sequence: int, step: int, correlation_id: int | str, *, last: bool = False) -> PreparedRequest:
        """Step `step` of sequence `sequence` (the END step where `last` or at its length)."""
        steps = self.steps[sequence % len(self.steps)]
        index = len(steps) - 1 if last else step
        flags = {"sequence_id": correlation_id, "start": index == 0, "end": index == len(steps) - 1}
        grpc = grpc_request(self.model, steps[index], version=self.version, **flags)
        body, json_size = http_request(steps[index], **flags)
        return PreparedRequest(grpc, body, json_size)

    def __getstate__(self) -> dict[str, Any]:  # worker processes get their own counter
        state = dict(self.__dict__)
        state["_numbers"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._numbers = itertools.count()


def sequence_plan(client: Any, model: str, *, batch_size: int = 1, version: str = "", size: int = 16,
                  rng: np.random.Generator | None = None) -> SequencePlan:
    """The sequences `model` gets: its data file's streams (a flat file is one stream), else `size`
    sequences of `inputs.sequence_length` synthesized steps."""
    from ..inputs import synthesize_inputs

    config = client.model_config(model)
    batching = config.get("sequence_batching") or {}
    declared = getattr(client, "declared", None)
    data = declared.data.get(model) if declared is not None else None
    length = max(1, int(getattr(declared, "sequence_length", 0) or DEFAULT_SEQUENCE_LENGTH))
    rng = rng or np.random.default_rng()
    if data is not None:
        metadata = client.model_metadata(model)
        streams = data.streams if data.nested else (tuple(data.entries),)
        steps = tuple(tuple(synthesize_inputs(metadata, config, batch_size=batch_size, dynamic_dim=client.dynamic_dim,
                                              shapes=client.input_shapes.get(model, {}), rng=rng, data=data,
                                              steps=[step] * batch_size)
                            for step in stream) for stream in streams)
    else:
        steps = tuple(tuple(client.synthesize(model, batch_size, rng=rng) for _ in range(length)) for _ in range(size))
    strategy = "oldest" if "oldest" in batching else "direct"
    if strategy == "oldest":
        live = int((batching.get("oldest") or {}).get("max_candidate_sequences") or 1)
    else:
        instances = sum(int(g.get("count") or 1) for g in config.get("instance_group") or [{}])
        live = max(1, int(config.get("max_batch_size") or 1)) * max(1, instances)
    return SequencePlan(model, version, steps, live, string_corrid(config), strategy)


DEFAULT_SEQUENCE_LENGTH = 20  # perf_analyzer's --sequence-length default


def build_pool(client: Any, model: str, *, batch_size: int = 1, size: int = DEFAULT_POOL_SIZE,
               version: str = "", seed: int | None = None, inputs: list[Mapping[str, np.ndarray]] | None = None) -> RequestPool:
    """A pool of `size` prebuilt requests with the model's declared data or random inputs
    synthesized from its metadata (through the TritonClient `client`), or the given `inputs`
    dictionaries; a sequence model's pool carries its SequencePlan instead."""
    rng = np.random.default_rng(seed)
    if client.is_sequence_model(model):
        plan = sequence_plan(client, model, batch_size=batch_size, version=version, rng=rng)
        first = plan.request(0, 0, plan.correlation_id(0))
        return RequestPool(model, version, batch_size, (first,), sequences=plan)
    cached = bool(client.model_config(model).get("response_cache", {}).get("enable"))
    samples = inputs or [client.synthesize(model, batch_size, rng=rng) for _ in range(size)]
    prepared = []
    for sample in samples:
        grpc = grpc_request(model, sample, version=version)
        body, json_size = http_request(sample)
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


def grpc_request(model: str, inputs: Mapping[str, np.ndarray], *, version: str = "", sequence_id: int | str = 0,
                 start: bool = True, end: bool = True) -> bytes:
    """One serialized ModelInferRequest with raw (binary) input contents; with a `sequence_id`
    (numeric or string), that sequence's START/END flags."""
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
        if isinstance(sequence_id, str):
            request.parameters["sequence_id"].string_param = sequence_id
        else:
            request.parameters["sequence_id"].int64_param = sequence_id
        request.parameters["sequence_start"].bool_param = start
        request.parameters["sequence_end"].bool_param = end
    return request.SerializeToString()


def http_request(inputs: Mapping[str, np.ndarray], *, sequence_id: int | str = 0, start: bool = True,
                 end: bool = True) -> tuple[bytes, int | None]:
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
        items, outputs=outputs, sequence_id=sequence_id, sequence_start=bool(sequence_id) and start,
        sequence_end=bool(sequence_id) and end,
    )
    return (body.encode() if isinstance(body, str) else body), json_size
