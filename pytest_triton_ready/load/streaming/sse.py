"""Triton's HTTP generate_stream endpoint (server-sent events): one request's chunks, its status
and error, and a body built from a streaming plan."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...llm_inputs import conventional_value, is_convention, sent_when_optional
from .requests import StreamingPlan


@dataclass
class SseOutcome:
    status: int
    chunks: list[dict[str, Any]]
    error: str | None
    ttft_s: float | None
    latency_s: float


def generate_stream(http_url: str, model: str, body: Mapping[str, Any], *, timeout_s: float = 30.0,
                    headers: Mapping[str, str] | None = None) -> SseOutcome:
    """POST /v2/models/M/generate_stream and read every event. The status is fixed by the first
    chunk, so each chunk is checked for an `error` member: a later error arrives under a 200."""
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{http_url.rstrip('/')}/v2/models/{model}/generate_stream",
                                     data=json.dumps(dict(body)).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    started = time.monotonic()
    chunks: list[dict[str, Any]] = []
    first = None
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status = response.status
            for raw in response:
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                first = first if first is not None else time.monotonic()
                try:
                    chunk = json.loads(line[5:].strip())
                except ValueError:
                    chunk = {"error": f"a chunk that is not JSON: {line[:200]}"}
                chunks.append(chunk)
                if "error" in chunk:
                    return SseOutcome(status, chunks, str(chunk["error"]), first - started, time.monotonic() - started)
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace")
        return SseOutcome(exc.code, chunks, text[:500], None, time.monotonic() - started)
    except (urllib.error.URLError, OSError) as exc:
        return SseOutcome(0, chunks, f"{type(exc).__name__}: {exc}", None, time.monotonic() - started)
    return SseOutcome(status, chunks, None, (first - started) if first is not None else None, time.monotonic() - started)


def sse_body(plan: StreamingPlan, prompt: str, max_tokens: int) -> dict[str, Any]:
    """A generate_stream body: the prompt and the budget by name, other scalars synthesized."""
    body: dict[str, Any] = {}
    for spec in plan.inputs:
        name = spec["name"]
        if name == plan.prompt_input:
            body[name] = prompt
        elif name == plan.max_tokens_input:
            body[name] = max_tokens
        elif is_convention(name, spec["datatype"]) and (name not in plan.optional
                                                       or sent_when_optional(name, spec["datatype"], True)):
            value = conventional_value(name, [1], decoupled=True, max_tokens=max_tokens).reshape(-1)[0]
            body[name] = value.decode() if isinstance(value, bytes) else bool(value)
        elif spec["datatype"] == "BOOL" and name not in plan.optional:
            body[name] = False
    return body
