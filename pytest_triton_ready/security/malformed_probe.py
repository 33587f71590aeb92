"""SEC-3 "malformed requests get clean errors" on a deployment: each READY model gets the cases of
malformed.py over HTTP (decoupled ones the cases of streaming.py over gRPC streams), a good request
before and after, and the server's health after every case (checks/test_security.py)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from ..load.streaming.requests import StreamingPlan
from ..load.streaming.single import send_request
from ..policy import policy
from ..server.models import initial_state_of, note_left_out, ready_decoupled_models, ready_models, ready_names
from .malformed import (
    ACCEPTED,
    NO_ANSWER,
    CaseAnswer,
    MalformedCase,
    build_cases,
    error_message,
    json_tensor,
    unknown_model_case,
)
from .malformed_streams import good_request, send_case, streaming_cases

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder
    from ..server.under_test import ServerUnderTest

OVERSIZE = "oversize payload"
GOOD_WHEN = {"before": "before any malformed one", "after": "after the malformed ones"}
JSON_FIX = ("Triton reports a request body that is not valid JSON as an internal error (HTTP 500; server "
            "issue #8762): reject malformed JSON where the traffic enters (an ingress or proxy that "
            "validates request bodies), or waive SEC-3 under gate.waivers naming that limitation.")
OVERSIZE_FIX = ("Bound the model's variable input dimensions in config.pbtxt (dims), or cap the request "
                "body size where the traffic enters (e.g. the ingress' maximum body size).")


def server_healthy(target: ServerUnderTest) -> bool | str:
    """True, or a sentence saying what got worse in the server's liveness or readiness since the
    run started (a /v2/health/ready at 400 from the start, one model having failed to load, is
    CFG-1's finding: here the models READY at the start must still be READY)."""
    client = target.client
    try:
        live, ready = client.get_status("/v2/health/live"), client.get_status("/v2/health/ready")
        ready_now = None if ready == 200 else ready_names(client)
    except ConnectionError as exc:
        return f"the server does not answer: {exc}"
    worse = initial_state_of(target).health_after(live == 200, ready, ready_now)
    return f"{worse}" if worse else True


def large_payload_refusal(settings: Any, oversize_bytes: int) -> str | None:
    """Why the oversize case is not sent (an attached server that does not allow large payloads of
    this size); None where it may be."""
    allowed = policy(settings)
    if not allowed.large_payload(oversize_bytes):
        return None
    return allowed.refusal("large_payloads", f"the oversize payload case sends {oversize_bytes / 2**20:g} MiB to "
                                             "every model")


def without_oversize(cases: list[Any], refusal: str | None, model: str, table: list[str]) -> list[Any]:
    """The cases less the oversize one where it is refused, noting that in the table."""
    if not refusal:
        return cases
    table.append(f"{model:20} oversize payload: not sent (large_payloads is not allowed)")
    return [c for c in cases if c.name != OVERSIZE]


class MalformedProbe:
    """SEC-3's requests and their judging on one server; `table` collects one line per case."""

    def __init__(self, check: CheckRecorder, target: ServerUnderTest, oversize_bytes: int, refusal: str | None) -> None:
        self.check, self.target, self.client = check, target, target.client
        self.oversize, self.refusal = oversize_bytes, refusal
        self.table: list[str] = []
        self.first_good_body: bytes | None = None

    def _healthy_after(self, case_name: str, model: str) -> None:
        healthy = server_healthy(self.target)
        if healthy is not True:
            self.check.finding(f"after the {case_name} request to {model}: {healthy}", model=model,
                               rule="server stays live and ready")

    def send(self, case: MalformedCase) -> None:
        """One case over HTTP, judged, then the server's health."""
        started = time.perf_counter()
        try:
            status, body = self.client.raw(case.path, "POST", case.body, case.headers)
            message = error_message(body)
        except ConnectionError as exc:
            status, message = None, str(exc)
        answer = CaseAnswer(case, status, message, time.perf_counter() - started)
        self.table.append(f"{case.model:20} {answer.line()}")
        self.check.measure(case.name, status if status is not None else NO_ANSWER, "HTTP status", model=case.model)
        problem = answer.problem()
        if problem is not None:
            severity, sentence = problem
            self.check.finding(sentence, severity=severity, model=case.model, rule=case.name)
        self._healthy_after(case.name, case.model)

    def _good(self, model: str, when: str) -> Any:
        outcome = self.client.infer(model)
        self.check.measure(f"good request {when}", "ok" if outcome.ok else "failed", model=model, threshold="ok",
                           comparison="==", finding=f"{model}: a good request failed {GOOD_WHEN[when]}: {outcome.error}")
        return outcome

    def unary(self, model: str) -> None:
        """The HTTP cases for one model, between two good requests."""
        before = self._good(model, "before")
        if not before.ok:
            return
        config = self.client.model_config(model)
        cases = build_cases(model, before.inputs, config, self.oversize, self.client.is_sequence_model(model))
        cases = without_oversize(cases, self.refusal, model, self.table)
        if self.first_good_body is None:
            self.first_good_body = json.dumps(
                {"inputs": [json_tensor(n, a) for n, a in before.inputs.items()]}).encode()
        if int(config.get("max_batch_size") or 0) == 0:
            self.table.append(f"{model:20} batch above max_batch_size: not applicable, max_batch_size is 0")
        for case in cases:
            self.send(case)
        self._good(model, "after")

    def _good_stream(self, plan: StreamingPlan, when: str, timeout: float) -> bool:
        answer = send_request(self.target.endpoints.grpc_url, good_request(plan, f"sec3-good-{when}"),
                              plan.token_output, timeout_s=timeout, headers=self.target.settings.headers)
        ok = answer.final and answer.error is None
        self.check.measure(f"good request {when}", "ok" if ok else "failed", model=plan.model, threshold="ok",
                           comparison="==", finding=f"{plan.model}: a good streamed request failed {when} the "
                                                    f"malformed ones: {answer.error or 'no final response'}")
        return ok

    def streamed(self, model: str) -> None:
        """The gRPC stream cases for one decoupled model, each on its own stream (streaming.py)."""
        check, client = self.check, self.client
        plan = StreamingPlan.from_metadata(model, client.model_metadata(model), client.model_config(model),
                                           declared=client.declared)
        timeout = float(self.target.settings.triton_request_timeout)
        if not self._good_stream(plan, "before", timeout):
            return
        cases = without_oversize(streaming_cases(plan, client.model_config(model), self.oversize), self.refusal,
                                 model, self.table)
        for case in cases:
            answer = send_case(self.target.endpoints.grpc_url, case, plan.token_output, timeout_s=timeout,
                               headers=self.target.settings.headers)
            self.table.append(f"{model:20} (gRPC stream) {answer.line()}")
            check.measure(case.name, answer.outcome, model=model)
            if answer.outcome == ACCEPTED:
                check.finding(f"{model}: the {case.name} request was accepted over the stream ({answer.tokens} "
                              f"tokens and the final response): {case.detail}", model=model, rule=case.name)
            elif answer.outcome == NO_ANSWER:
                check.finding(f"{model}: the {case.name} request got neither an error nor a final response within "
                              f"{timeout:g} s", model=model, rule=case.name)
            self._healthy_after(case.name, model)
        self._good_stream(plan, "after", timeout)


def fixes_for(errors: list[Any]) -> list[str]:
    """The recommendations the failed cases call for."""
    fixes = []
    if any(f.rule == "invalid JSON" and "HTTP 5" in f.message for f in errors):
        fixes.append(JSON_FIX)
    if any(f.rule == OVERSIZE and f.severity == "error" for f in errors):
        fixes.append(OVERSIZE_FIX)
    return fixes


def judge_malformed(check: CheckRecorder, target: ServerUnderTest, settings: Any) -> None:
    """Every READY model refuses each malformed case cleanly, good requests before and after
    succeed, and the server stays live and ready; the unknown-model case once. The oversize case
    refused by the policy is a warning beside other failures, else INCOMPLETE."""
    note_left_out(check, target)
    models = ready_models(target)  # decoupled models refuse HTTP /infer: their cases go over gRPC streams
    decoupled = ready_decoupled_models(target)
    if not models and not decoupled:
        check.incomplete("no READY model to send malformed requests to")
    oversize = int(check.threshold("malformed_oversize_payload_mib").value * 2**20)
    refusal = large_payload_refusal(settings, oversize)
    probe = MalformedProbe(check, target, oversize, refusal)
    for model in decoupled:
        probe.streamed(model)
    for model in models:
        probe.unary(model)
    if probe.first_good_body is not None:
        probe.send(unknown_model_case(probe.first_good_body))
    check.evidence("malformed requests (model, case, HTTP status, outcome, time, request, answer)",
                   "\n".join(probe.table))
    for fix in fixes_for(check.errors):
        check.recommend(fix)
    if refusal:
        if check.errors:
            check.finding(refusal, severity="warning", rule="attach.allow")
        else:
            check.incomplete(refusal)
