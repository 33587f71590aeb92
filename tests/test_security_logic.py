"""SEC-1, SEC-2 and SEC-3 decisions without a server: an API that does not answer is not judged
restricted, a 5xx for a client's malformed request fails, which endpoints must speak TLS and what a
certificate must show."""

from __future__ import annotations

from default_settings import default_settings

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


# -- what SEC-1, SEC-2 and SEC-3 decide from what they read (security/api_audit, transport, malformed_probe) --
def test_sec1_names_unknown_categories_and_sees_a_protocol_that_answered_nothing():
    from pytest_triton_ready.security.api_audit import answered, restriction_fix, unknown_categories

    assert unknown_categories(["logging", "model_repository", "trace"]) == ["model_repository"]
    silent = {"logging": [ProbeAnswer("grpc", "call", UNREACHABLE, "")]}
    assert not answered(silent) and answered({**silent, "trace": [ProbeAnswer("grpc", "call", RESTRICTED, "")]})
    assert "--http-restricted-api=logging,trace:<header>=<secret>" in restriction_fix(["logging", "trace"])


def test_sec2_an_exposed_server_on_plain_http_is_a_finding_and_its_grpc_is_inspected():
    from pytest_triton_ready.security.transport import transport_plan

    plan = transport_plan("http://triton.example:8000", "triton.example:8001", True, True)
    assert plan.plain_http == "HTTP is plain http (http://triton.example:8000) on a server reachable beyond its cluster"
    assert plan.targets == [("gRPC", "triton.example", 8001)] and plan.not_required is None


def test_sec2_https_is_inspected_and_grpc_left_out_where_declared_internal():
    from pytest_triton_ready.security.transport import transport_plan

    plan = transport_plan("https://triton.example", "[::1]:8001", True, False)
    assert plan.targets == [("HTTP", "triton.example", 443)] and plan.plain_http is None
    assert transport_plan("https://[::1]:8443", "[::1]:8001", None, True).targets == [("HTTP", "::1", 8443)]


def test_sec2_undeclared_exposure_is_incomplete_off_loopback_and_not_required_on_it():
    from pytest_triton_ready.security.transport import transport_plan

    off = transport_plan("http://10.0.0.5:8000", "10.0.0.5:8001", None, True)
    assert off.undeclared and "not declared" in off.undeclared and not off.targets
    loopback = transport_plan("http://127.0.0.1:8000", "127.0.0.1:8001", None, True)
    assert loopback.not_required.startswith("the server listens on loopback only")
    internal = transport_plan("http://10.0.0.5:8000", "10.0.0.5:8001", False, True)
    assert internal.not_required == "security.exposed_beyond_cluster is false" and not internal.targets


def _certificate(days_left: float, protocol="TLSv1.3", verified=True):
    import datetime as dt

    from pytest_triton_ready.security.tls import CertificateReport

    now = dt.datetime.now(dt.timezone.utc)
    return CertificateReport("triton.example:443", protocol, "TLS_AES_256_GCM_SHA384", "CN=triton", "CN=ca",
                             now - dt.timedelta(days=30), now + dt.timedelta(days=days_left), ["triton.example"],
                             verified, None if verified else "unable to get local issuer certificate")


def _recorder():
    from pytest_triton_ready.record.model import Result
    from pytest_triton_ready.record.recorder import CheckRecorder

    return CheckRecorder(Result("SEC-2", "security", "t", "checks/test_security.py::t"), default_settings())


def test_sec2_a_certificate_near_expiry_warns_and_an_old_protocol_or_unverified_one_fails():
    from pytest_triton_ready.security.transport import judge_certificate

    check = _recorder()
    judge_certificate(check, "HTTP", _certificate(200), check.threshold("tls_cert_expiry_warning_days"))
    assert not check.failed and not check.result.findings
    soon = _recorder()
    judge_certificate(soon, "HTTP", _certificate(5), soon.threshold("tls_cert_expiry_warning_days"))
    assert not soon.failed and [f.severity for f in soon.result.findings] == ["warning"]
    bad = _recorder()
    judge_certificate(bad, "gRPC", _certificate(200, "TLSv1.1", verified=False),
                      bad.threshold("tls_cert_expiry_warning_days"))
    assert [f.message for f in bad.errors] == [
        "gRPC: the certificate does not verify: unable to get local issuer certificate",
        "gRPC: negotiated TLSv1.1; TLS 1.2 or newer is required"]


def test_sec3_a_refused_oversize_case_is_left_out_and_said_so():
    from pytest_triton_ready.security.malformed_probe import without_oversize

    cases = [MalformedCase(name, "m", "/v2/models/m/infer", b"", {}, "") for name in ("wrong shape", "oversize payload")]
    table: list[str] = []
    assert without_oversize(cases, None, "m", table) == cases and table == []
    assert [c.name for c in without_oversize(cases, "not run on the attached server", "m", table)] == ["wrong shape"]
    assert table == ["m                    oversize payload: not sent (large_payloads is not allowed)"]


def test_sec3_recommends_the_fix_each_failed_case_calls_for():
    from types import SimpleNamespace

    from pytest_triton_ready.security.malformed_probe import JSON_FIX, OVERSIZE_FIX, fixes_for

    json_500 = SimpleNamespace(rule="invalid JSON", message="m: ... refused with HTTP 500 ...", severity="error")
    oversize = SimpleNamespace(rule="oversize payload", message="m: accepted", severity="error")
    assert fixes_for([json_500, oversize]) == [JSON_FIX, OVERSIZE_FIX]
    assert fixes_for([SimpleNamespace(rule="invalid JSON", message="HTTP 400", severity="warning")]) == []
