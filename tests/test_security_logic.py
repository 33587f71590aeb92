"""SEC-1 and SEC-3 decisions without a server: an API that does not answer is not judged
restricted, and a 5xx for a client's malformed request fails."""

from __future__ import annotations

from pytest_triton_ready.security.malformed import CaseAnswer, MalformedCase
from pytest_triton_ready.security.restricted import OPEN, RESTRICTED, UNREACHABLE, CategoryExposure, ProbeAnswer


def _exposure(*answers):
    return CategoryExposure("model-repository", [ProbeAnswer(p, "call", state, "answer") for p, state in answers])


def test_a_required_api_that_does_not_answer_is_not_judged_restricted():
    """Issue 23 g: HTTP refuses, gRPC does not answer at all: the gRPC side is not shown restricted."""
    silent_grpc = _exposure(("http", RESTRICTED), ("grpc", UNREACHABLE), ("grpc", UNREACHABLE))
    assert silent_grpc.state() == RESTRICTED  # the summary state, reported
    assert silent_grpc.judged_state() is None and silent_grpc.unanswered_protocols() == ["grpc"]
    assert _exposure(("http", UNREACHABLE), ("grpc", UNREACHABLE)).judged_state() is None
    assert _exposure(("http", RESTRICTED), ("grpc", RESTRICTED), ("grpc", UNREACHABLE)).judged_state() == RESTRICTED
    assert _exposure(("http", OPEN), ("grpc", UNREACHABLE)).judged_state() == OPEN  # open is open, whatever else
    assert CategoryExposure("trace").judged_state() is None


def _answer(status, message="bad request"):
    case = MalformedCase("invalid JSON", "scale", "/v2/models/scale/infer", b"{", {}, "the body cut in half")
    return CaseAnswer(case, status, message, 0.01)


def test_a_server_error_for_a_malformed_request_fails_sec3():
    """Issue 23 g: HTTP 500 for a client's mistake is an error finding, not a warning."""
    severity, sentence = _answer(500, "failed to parse the request JSON buffer").problem()
    assert severity == "error"
    assert sentence.startswith("scale: the invalid JSON request is refused with HTTP 500, a server error for a "
                               "client's mistake")
    assert _answer(400).problem() is None
    assert _answer(400, "").problem()[0] == "warning"
    assert _answer(200).problem()[0] == _answer(None, "timed out").problem()[0] == "error"
