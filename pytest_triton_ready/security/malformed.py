"""SEC-3: malformed requests, built from a model's own metadata, and how a server answered them.

Each case starts from a well-formed request (the synthesized inputs a good request would carry) and
breaks exactly one thing, so the answer speaks to that one thing. Sequence models get a one-request
sequence's parameters, so the sequence batcher is not what refuses the request.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

CLEAN, SERVER_ERROR, ACCEPTED, NO_ANSWER = "clean error", "server error", "accepted", "no answer"
UNKNOWN_MODEL = f"triton-ready-probe-{uuid.uuid4().hex[:12]}-does-not-exist"


@dataclass
class MalformedCase:
    """One bad request: where it goes and its bytes."""

    name: str
    model: str
    path: str
    body: bytes
    headers: dict[str, str]
    detail: str


@dataclass
class CaseAnswer:
    """What the server said to one case."""

    case: MalformedCase
    status: int | None
    message: str
    elapsed_s: float

    @property
    def outcome(self) -> str:
        if self.status is None:
            return NO_ANSWER
        if 200 <= self.status < 300:
            return ACCEPTED
        if 400 <= self.status < 500:
            return CLEAN
        return SERVER_ERROR

    def problem(self) -> tuple[str, str] | None:
        """(severity, sentence) of what is wrong with this answer, or None for a clean refusal: an
        accepted case, no answer and a 5xx (the server reporting its own failure for a client's
        mistake, which 5xx alerts and retrying clients count) fail SEC-3; a 4xx without a message is
        a warning."""
        case, status = self.case, self.status
        outcome = self.outcome
        if outcome == ACCEPTED:
            return "error", f"{case.model}: the {case.name} request was accepted (HTTP {status}): {case.detail}"
        if outcome == NO_ANSWER:
            return "error", f"{case.model}: the {case.name} request got no answer: {self.message}"
        if outcome == SERVER_ERROR:
            return "error", (f"{case.model}: the {case.name} request is refused with HTTP {status}, a server error "
                             "for a client's mistake (5xx alerts and retrying clients count it)"
                             + (f": {self.message[:200]}" if self.message else ""))
        if not self.message:
            return "warning", f"{case.model}: the {case.name} request is refused with HTTP {status} but no error message"
        return None

    def line(self) -> str:
        status = self.status if self.status is not None else "-"
        return (f"{self.case.name:27} {status!s:>4} {self.outcome:12} {self.elapsed_s * 1000:8.1f} ms  "
                f"{self.case.detail}; answer: {self.message[:200]}")


def error_message(body: bytes) -> str:
    """The "error" field of a JSON error body ("" when it has none); else the body's first 200
    characters."""
    try:
        return str(json.loads(body).get("error", ""))
    except (ValueError, AttributeError):
        return body[:200].decode(errors="replace")


def json_tensor(name: str, array: np.ndarray, datatype: str | None = None) -> dict[str, Any]:
    """A tensor in the KServe v2 JSON form."""
    from tritonclient.utils import np_to_triton_dtype

    datatype = datatype or np_to_triton_dtype(array.dtype)
    data = array.flatten().tolist()
    if datatype == "BYTES":
        data = [d.decode(errors="replace") if isinstance(d, bytes) else str(d) for d in data]
    return {"name": name, "shape": list(array.shape), "datatype": datatype, "data": data}


def _other_datatype(datatype: str) -> str:
    if datatype.startswith("FP") or datatype == "BF16":
        return "FP64" if datatype != "FP64" else "FP32"
    if datatype.startswith(("INT", "UINT")):
        return "INT64" if datatype != "INT64" else "INT32"
    if datatype == "BOOL":
        return "INT32"
    return "FP32"


def _convert(data: list[Any], datatype: str) -> list[Any]:
    if datatype.startswith("FP"):
        return [float(v) if not isinstance(v, str) else 0.0 for v in data]
    if datatype.startswith(("INT", "UINT")):
        return [int(v) if not isinstance(v, str) else 0 for v in data]
    return data


def build_cases(model: str, inputs: dict[str, np.ndarray], config: dict[str, Any],
                oversize_bytes: int, sequence: bool) -> list[MalformedCase]:
    """The malformed cases for one model, from the inputs of a good request (batch 1)."""
    good = [json_tensor(name, array) for name, array in inputs.items()]
    parameters = {"sequence_id": int(np.random.default_rng().integers(1, 2**31)), "sequence_start": True,
                  "sequence_end": True} if sequence else {}
    path = f"/v2/models/{model}/infer"

    def request(tensors: list[dict[str, Any]], **extra: Any) -> bytes:
        return json.dumps({"inputs": tensors, "parameters": {**parameters, **extra}}).encode()

    def case(name: str, body: bytes, detail: str, headers: dict[str, str] | None = None,
             to: str = path) -> MalformedCase:
        return MalformedCase(name, model, to, body, {"Content-Type": "application/json", **(headers or {})}, detail)

    if not good:
        return []
    first = good[0]
    optional = {i.get("name") for i in config.get("input", []) if i.get("optional")}
    required = [t for t in good if t["name"] not in optional]
    cases = []
    other = _other_datatype(first["datatype"])
    wrong_type = [{**first, "datatype": other, "data": _convert(first["data"], other)}] + good[1:]
    cases.append(case("wrong datatype", request(wrong_type), f"{first['name']} sent as {other}, "
                                                            f"declared {first['datatype']}"))
    wrong_shape = [{**first, "shape": first["shape"] + [1]}] + good[1:]
    cases.append(case("wrong shape", request(wrong_shape), f"{first['name']} shape {first['shape'] + [1]}"))
    if required:
        left_out = required[0]["name"]
        cases.append(case("missing input", request([t for t in good if t["name"] != left_out]),
                          f"{left_out} left out"))
    cases.append(_oversize_case(model, path, first, good[1:], config, oversize_bytes, parameters))
    cases.append(case("invalid JSON", request(good)[: max(8, len(request(good)) // 2)], "the body cut in half"))
    max_batch = int(config.get("max_batch_size") or 0)
    if max_batch > 0:
        batch = max_batch + 1
        too_big = [{**t, "shape": [batch] + t["shape"][1:], "data": t["data"] * batch} for t in good]
        cases.append(case("batch above max_batch_size", request(too_big),
                          f"batch {batch}, max_batch_size {max_batch}"))
    return cases


def unknown_model_case(inputs_body: bytes) -> MalformedCase:
    """A well-formed request to a model that does not exist."""
    return MalformedCase("unknown model", UNKNOWN_MODEL, f"/v2/models/{UNKNOWN_MODEL}/infer", inputs_body,
                         {"Content-Type": "application/json"}, f"model {UNKNOWN_MODEL}")


def _oversize_case(model: str, path: str, first: dict[str, Any], rest: list[dict[str, Any]],
                   config: dict[str, Any], oversize_bytes: int, parameters: dict[str, Any]) -> MalformedCase:
    """The first input grown to `oversize_bytes` of FP32-sized elements along its variable
    dimensions (a model with fixed dimensions must refuse the shape anyway), sent as binary data."""
    declared = next((i for i in config.get("input", []) if i.get("name") == first["name"]), {})
    dims = [int(d) for d in declared.get("dims", [])]
    batched = int(config.get("max_batch_size") or 0) > 0
    shape = ([1] if batched else []) + [1 if d == -1 else d for d in dims]
    fixed = int(np.prod([d for d in shape if d > 0])) or 1
    elements = max(1, oversize_bytes // _itemsize(first["datatype"]))
    variable = [i + (1 if batched else 0) for i, d in enumerate(dims) if d == -1]
    if variable:
        shape[variable[0]] = max(1, elements // fixed)
    else:
        shape = shape + [max(1, elements // fixed)]
    data = bytes(int(np.prod(shape)) * _itemsize(first["datatype"]))  # zeros; BYTES: empty strings
    header = json.dumps({
        "inputs": [{"name": first["name"], "shape": shape, "datatype": first["datatype"],
                    "parameters": {"binary_data_size": len(data)}}] + rest,
        "parameters": {**parameters, "binary_data_output": True},
    }).encode()
    return MalformedCase("oversize payload", model, path, header + data,
                         {"Content-Type": "application/octet-stream",
                          "Inference-Header-Content-Length": str(len(header))},
                         f"{first['name']} shape {shape}, {len(data) / 2**20:.0f} MiB")


def _itemsize(datatype: str) -> int:
    """Bytes per element in Triton's binary tensor format (BYTES: a 4-byte length, here of empty strings)."""
    from tritonclient.utils import triton_to_np_dtype

    if datatype == "BYTES":
        return 4
    if datatype == "BF16":
        return 2
    return np.dtype(triton_to_np_dtype(datatype)).itemsize
