"""The requests the monitoring checks send so that counters and summaries move: one at a time to
a unary model, or over a gRPC stream to a decoupled one (which answers no other way)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..load.streaming.requests import StreamingPlan
from ..load.streaming.single import stream_once
from ..server.models import ready_decoupled_models, ready_models

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder
    from ..server.under_test import ServerUnderTest

PROBE_REQUESTS_PER_MODEL = 10


def stream_one(target: ServerUnderTest, model: str, prompt: str) -> Any:
    """One streamed request to a decoupled model (2 tokens), waited for until its final response."""
    client = target.client
    plan = StreamingPlan.from_metadata(model, client.model_metadata(model), client.model_config(model),
                                       declared=client.declared)
    return stream_once(target.endpoints.grpc_url, plan, prompt, 2, timeout_s=target.settings.triton_request_timeout,
                       headers=target.settings.headers)


def one_request_sender(target: ServerUnderTest) -> tuple[str, Callable[[], str | None]] | None:
    """A model and a function that sends it one request, returning why it failed (None: it
    succeeded): the first READY unary model, else the first decoupled one; None where neither."""
    model = next(iter(ready_models(target)), None)
    if model is not None:
        def infer() -> str | None:
            outcome = target.client.infer(model)
            return None if outcome.ok else f"the inference meant to move the counters failed: {outcome.error}"
        return model, infer
    streaming = next(iter(ready_decoupled_models(target)), None)
    if streaming is None:
        return None

    def stream() -> str | None:
        answer = stream_one(target, streaming, "metrics")
        if answer.final:
            return None
        return f"the streamed request meant to move the counters failed: {answer.error or 'no final response'}"
    return streaming, stream


def probe(check: CheckRecorder, target: ServerUnderTest, models: list[str], streaming: list[str]) -> None:
    """PROBE_REQUESTS_PER_MODEL requests to every model (streamed to decoupled ones); failures are
    evidence, not findings: the layers read afterwards judge the success rate."""
    for model in models:
        outcomes = [target.client.infer(model) for _ in range(PROBE_REQUESTS_PER_MODEL)]
        failed = [o for o in outcomes if not o.ok]
        if failed:
            check.evidence(f"{model}: {len(failed)} of {len(outcomes)} probe requests failed", str(failed[0].error))
    for model in streaming:
        answers = [stream_one(target, model, f"probe {n}") for n in range(PROBE_REQUESTS_PER_MODEL)]
        failed = [a for a in answers if not a.final or a.error]
        if failed:
            check.evidence(f"{model}: {len(failed)} of {len(answers)} streamed probe requests failed",
                           str(failed[0].error or "no final response"))


def serve_every_model_once(target: ServerUnderTest) -> None:
    """One request to every READY model: Triton's summaries report NaN until a model served once."""
    for model in ready_models(target):
        target.client.infer(model)
    for model in ready_decoupled_models(target):
        stream_one(target, model, "before the alert rules are evaluated")
