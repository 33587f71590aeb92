"""CFG-1 for a decoupled model: a real streamed request answered with output and a final response
within the deadline, every response keeping the declared output contract, the team's
`expectations:` met, the same request answered the same twice, and HTTP generate_stream carrying
no error in any chunk. Each part records on the check."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..expectations import answer_mismatches, expectation_for
from ..input_data import InputData, InputDataError
from ..load.streaming.requests import StreamingPlan
from ..load.streaming.single import answer_values, stream_arrays
from ..load.streaming.sse import generate_stream, sse_body
from ..load.streaming.stats import RequestRecord

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder

QUESTION = "Is this deployment ready for production?"
ANSWER_TOKENS = 8
SSE_TOKENS = 4


def check_answers(streaming: Any, model: str) -> None:
    """Every CFG-1 rule for `model`, recorded on `streaming.check` (load/streaming/run.StreamingRun)."""
    check, plan = streaming.check, streaming.plan(model)
    check.evidence(f"{model} request plan", f"text input {plan.prompt_input}, token budget input "
                   f"{plan.max_tokens_input}, tokens counted from output {plan.token_output}"
                   + (f", data from {plan.data.source}" if plan.data else ""))
    try:
        arrays = plan.arrays(QUESTION, ANSWER_TOKENS, np.random.default_rng(0))
    except InputDataError as exc:
        check.finding(f"{model}: {exc}", model=model, rule="input-data")
        return
    first = _send(streaming, plan, arrays, f"{model}-answer-1")
    if first.error:
        check.finding(f"{model}: the streamed request failed: {first.error} {streaming.triton.client.refusal_hint(model)}",
                      model=model)
        check.evidence(f"{model} error", first.error)
        return
    record_answer(check, model, plan, first, streaming.n("streaming_final_deadline_s"))
    expectation = expectation_for(model, streaming.triton.settings.expectations, plan.data)
    for problem in expectation_problems(streaming, model, plan, expectation):
        check.finding(f"{model}: {problem}", model=model, rule="answer")
    again = _send(streaming, plan, arrays, f"{model}-answer-2")
    if first.final and again.final and again.text != first.text:
        check.finding(f"{model}: the same request gave different answers on two requests ({first.text[:8]} then "
                      f"{again.text[:8]})", severity="error" if expectation.deterministic else "warning",
                      model=model, rule="determinism")
    check_generate_stream(streaming, model, plan)


def _send(streaming: Any, plan: StreamingPlan, arrays: dict[str, np.ndarray], request_id: str) -> RequestRecord:
    return stream_arrays(streaming.triton.endpoints.grpc_url, plan, arrays, request_id,
                         timeout_s=streaming.n("streaming_final_deadline_s"), headers=streaming.triton.settings.headers)


def record_answer(check: CheckRecorder, model: str, plan: StreamingPlan, answer: RequestRecord, deadline_s: float) -> None:
    """The final flag, the output tokens, the output contract and the TTFT of one answer."""
    check.measure("final flag received", answer.final, model=model, threshold=True, comparison="==",
                  finding=f"{model}: request {answer.id} got {answer.tokens} tokens in {answer.responses} responses and "
                          f"no final response within {deadline_s:g} s")
    check.measure("output tokens", answer.tokens, "tokens", model=model, threshold=1, comparison=">=",
                  finding=f"{model}: the answer carried no output in {plan.token_output}")
    for problem in answer.problems:
        check.finding(f"{model}: {problem}", model=model, rule="output-contract")
    if answer.ttft_s is not None:
        check.measure("time to first token", round(answer.ttft_s * 1000, 3), "ms", model=model)


def expectation_problems(streaming: Any, model: str, plan: StreamingPlan, expectation: Any) -> list[str]:
    """How the answers to the team's expected cases differ from what they expect."""
    problems: list[str] = []
    for case in expectation.cases:
        case_plan = streaming.plan(model)
        case_plan.data = InputData(case.where, ((case.inputs,),))
        try:
            answer = _send(streaming, case_plan, case_plan.arrays(QUESTION, ANSWER_TOKENS, np.random.default_rng(0)),
                           f"{model}-expected")
            problems += ([f"{case.where}: the request failed: {answer.error}"] if answer.error else
                         answer_mismatches(case, answer_values(answer), plan.outputs, batched=plan.batched))
        except InputDataError as exc:
            problems.append(str(exc))
    return problems


def check_generate_stream(streaming: Any, model: str, plan: StreamingPlan) -> None:
    """HTTP generate_stream answers without an error in any chunk (a warning otherwise)."""
    check, triton = streaming.check, streaming.triton
    sse = generate_stream(triton.endpoints.http_url, model, sse_body(plan, QUESTION, SSE_TOKENS),
                          timeout_s=streaming.n("streaming_final_deadline_s"), headers=triton.settings.headers)
    check.measure("generate_stream chunks", len(sse.chunks), "chunks", model=model)
    if sse.error:
        where = "under HTTP 200, in a chunk" if sse.status == 200 else f"HTTP {sse.status}"
        check.finding(f"{model}: generate_stream answered an error ({where}): {sse.error}", severity="warning",
                      model=model, rule="generate-stream")
        check.evidence(f"{model} generate_stream", str(sse.chunks[-3:]) + " " + sse.error)
