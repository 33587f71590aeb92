"""Phase "security": beyond the review's list, what an exposed inference server must not allow.

SEC-1 restricted APIs, SEC-2 transport (TLS and certificates), SEC-3 malformed input, SEC-4 secrets
kept out of every output. No probe changes the server's models or settings (SEC-1's load and unload
name a model that does not exist). SEC-3's oversize payload is a large request body, which a model
with a variable dimension may execute: against an attached server it is sent only when
`attach.allow` has `large_payloads` (or the payload is under attach.max_payload_mib).
"""

import json
import time
from urllib.parse import urlsplit

import pytest

from pytest_triton_ready.models import note_left_out, ready_decoupled_models, ready_models
from pytest_triton_ready.security.malformed import ACCEPTED, NO_ANSWER, build_cases, error_message, unknown_model_case
from pytest_triton_ready.security.restricted import (
    API_CATEGORIES,
    OPEN,
    REQUIRED_BY_DEFAULT,
    RESTRICTED,
    exposures,
    probe_grpc,
    probe_http,
)
from pytest_triton_ready.security.schema import TlsSettings
from pytest_triton_ready.security.secrets import find_leaks, labelled_secrets, searchable
from pytest_triton_ready.security.tls import TLSNotOffered, inspect_tls, is_loopback
from pytest_triton_ready.target import declared_endpoints


def _tls_settings(settings):
    return settings.section_model("security").tls or TlsSettings()


def _ssl_context(settings):
    import ssl

    ca_file = _tls_settings(settings).ca_file
    return ssl.create_default_context(cafile=ca_file) if ca_file else None


@pytest.mark.triton_check("SEC-1")
def test_restricted_apis_need_credentials(triton, triton_settings, check):
    """The model-repository (load, unload), shared-memory, logging and trace APIs (or the list in
    security.restricted_apis) refuse a caller without credentials, over HTTP and gRPC. A required
    API that does not answer over a protocol is not judged restricted: the check is INCOMPLETE
    naming it (unless another API failed)."""
    required = triton_settings.section_model("security").restricted_apis or list(REQUIRED_BY_DEFAULT)
    unknown = [api for api in required if api not in API_CATEGORIES]
    for api in unknown:
        check.finding(f"security.restricted_apis names {api!r}, which is not a Triton API category "
                      f"(known: {', '.join(API_CATEGORIES)})", rule="security.restricted_apis")
    timeout = triton_settings.triton_request_timeout
    http = probe_http(triton.endpoints.http_url, timeout, _ssl_context(triton_settings))
    grpc = probe_grpc(triton.endpoints.grpc_url, timeout)
    found = exposures(http, grpc)
    for category, exposure in found.items():
        state = exposure.state()
        check.evidence(f"{category} probes", "\n".join(a.line() for a in exposure.answers))
        if category not in required:
            check.measure(f"{category} API", state, finding=None)
            continue
        silent = exposure.unanswered_protocols()
        if silent and exposure.judged_state() is None:
            check.evidence(f"{category} API not judged", f"no answer over {' and '.join(p.upper() for p in silent)}: "
                           "an API that does not answer may be restricted or down; its restriction is not shown")
        check.measure(f"{category} API", exposure.judged_state(), threshold=RESTRICTED, comparison="==",
                      finding=f"the {category} API answers without credentials over "
                              f"{' and '.join(p.upper() for p in exposure.open_protocols())}")
    if all(a.state not in (OPEN, RESTRICTED) for answers in grpc.values() for a in answers):
        check.finding(f"gRPC at {triton.endpoints.grpc_url} did not answer: its APIs were not probed", severity="warning")
    if all(a.state not in (OPEN, RESTRICTED) for answers in http.values() for a in answers):
        check.incomplete(f"HTTP at {triton.endpoints.http_url} did not answer the probes")
    open_required = [c for c in required if c in found and found[c].state() == OPEN]
    if open_required:
        apis = ",".join(open_required)
        check.recommend(f"Start tritonserver with --http-restricted-api={apis}:<header>=<secret> and "
                        f"--grpc-restricted-protocol={apis}:<header>=<secret>, and give the header only to "
                        "operators (gRPC clients send it as triton-grpc-protocol-<header>).")


@pytest.mark.triton_check("SEC-2")
def test_transport_uses_tls_when_exposed(triton_settings, check, request):
    """When security.exposed_beyond_cluster is true, HTTP is served over https and gRPC over TLS
    (unless security.tls.grpc is false), with certificates that verify and are in their validity
    period; a certificate expiring within tls_cert_expiry_warning_days is a warning."""
    security = triton_settings.section_model("security")
    tls = _tls_settings(triton_settings)
    endpoints = declared_endpoints(triton_settings) or request.getfixturevalue("triton").endpoints
    http = urlsplit(endpoints.http_url)
    grpc_host, _, grpc_port = endpoints.grpc_url.rpartition(":")
    exposed = security.exposed_beyond_cluster
    check.measure("exposed beyond its cluster (declared)", "unknown" if exposed is None else str(exposed).lower())

    if exposed is None and not is_loopback(http.hostname or ""):
        check.incomplete("security.exposed_beyond_cluster is not declared, and the server is not on loopback: "
                         "say whether clients outside its cluster can reach it")
    targets = []
    if http.scheme == "https":
        targets.append(("HTTP", http.hostname, http.port or 443))
    elif exposed:
        check.finding(f"HTTP is plain http ({endpoints.http_url}) on a server reachable beyond its cluster",
                      rule="SEC-2")
        check.recommend("Terminate TLS in front of Triton's HTTP port (ingress or proxy) and point "
                        "--triton-url at the https address.")
    if exposed and tls.grpc:
        targets.append(("gRPC", grpc_host.strip("[]"), int(grpc_port)))
    if not targets and not check.errors:
        reason = ("security.exposed_beyond_cluster is false" if exposed is False else
                  "the server listens on loopback only and security.exposed_beyond_cluster is not declared")
        check.not_applicable(f"{reason}: TLS is not required, and no https endpoint to inspect")

    warn_days = check.threshold("tls_cert_expiry_warning_days")
    timeout = triton_settings.triton_request_timeout
    for label, host, port in targets:
        try:
            cert = inspect_tls(host, port, tls.server_name, tls.ca_file, timeout)
        except TLSNotOffered as exc:
            check.finding(f"{label}: {exc}: the endpoint is plaintext", rule="SEC-2")
            if label == "gRPC":
                check.recommend("Start tritonserver with --grpc-use-ssl=true --grpc-server-cert=... "
                                "--grpc-server-key=..., or set security.tls.grpc: false if gRPC is not exposed.")
            continue
        except OSError as exc:
            check.finding(f"{label}: nothing answers at {host}:{port} ({exc})", rule="SEC-2")
            continue
        check.evidence(f"{label} certificate", cert.describe())
        check.measure("certificate verifies", cert.verified, model=label, threshold=True, comparison="==",
                      finding=f"{label}: the certificate does not verify: {cert.verify_error}")
        check.measure("TLS protocol", cert.protocol, model=label)
        if cert.protocol in ("TLSv1", "TLSv1.1", "SSLv3"):
            check.finding(f"{label}: negotiated {cert.protocol}; TLS 1.2 or newer is required", model=label)
        if cert.not_yet_valid():
            check.finding(f"{label}: the certificate is not valid before {cert.not_before.isoformat()}", model=label)
        days = cert.days_left()
        if check.measure("days until certificate expiry", days, "days", model=label, threshold=0, comparison=">",
                         finding=f"{label}: the certificate expired on {cert.not_after.date().isoformat()}"):
            if days < warn_days.value:
                check.finding(f"{label}: the certificate expires in {days:g} days ({cert.not_after.date().isoformat()}), "
                              f"within the warning period of {warn_days.value:g} days", severity="warning",
                              model=label, rule="tls_cert_expiry_warning_days")
                check.recommend("Renew the server certificate before it expires (automate it, e.g. cert-manager).")


@pytest.mark.triton_check("SEC-3")
def test_malformed_requests_get_clean_errors(triton, triton_settings, check):
    """Every model refuses malformed requests (wrong datatype, wrong shape, missing input, oversize
    payload, invalid JSON, batch above max_batch_size; and an unknown model) with a clean error (a
    4xx with a message; a 5xx for a client's mistake fails),
    the server stays live and ready, and good requests before and after succeed. Decoupled
    (streaming) models get the same cases over gRPC ModelStreamInfer (raw bytes cut short instead
    of invalid JSON), where a clean refusal is an error inside the stream."""
    client = triton.client
    note_left_out(check, triton)
    models = ready_models(triton)  # decoupled models refuse HTTP /infer: their cases go over gRPC streams
    decoupled = ready_decoupled_models(triton)
    if not models and not decoupled:
        check.incomplete("no READY model to send malformed requests to")
    oversize = int(check.threshold("malformed_oversize_payload_mib").value * 2**20)
    from pytest_triton_ready.policy import policy

    large_refused = policy(triton_settings).refusal("large_payloads", f"the oversize payload case sends "
                                                                      f"{oversize / 2**20:g} MiB to every model") \
        if policy(triton_settings).large_payload(oversize) else None
    table: list[str] = []

    def send(case):
        started = time.perf_counter()
        try:
            status, body = client.raw(case.path, "POST", case.body, case.headers)
        except ConnectionError as exc:
            return case, None, str(exc), time.perf_counter() - started
        return case, status, error_message(body), time.perf_counter() - started

    def judge(case, status, message, elapsed):
        from pytest_triton_ready.security.malformed import CaseAnswer

        answer = CaseAnswer(case, status, message, elapsed)
        table.append(f"{case.model:20} {answer.line()}")
        check.measure(case.name, status if status is not None else NO_ANSWER, "HTTP status", model=case.model)
        problem = answer.problem()
        if problem is not None:
            severity, sentence = problem
            check.finding(sentence, severity=severity, model=case.model, rule=case.name)
        healthy = _server_healthy(triton)
        if healthy is not True:
            check.finding(f"after the {case.name} request to {case.model}: {healthy}", model=case.model,
                          rule="server stays live and ready")
        return answer

    first_good_body = None
    for model in decoupled:
        _malformed_streams(triton, check, model, oversize, large_refused, table)
    for model in models:
        before = client.infer(model)
        check.measure("good request before", "ok" if before.ok else "failed", model=model, threshold="ok",
                      comparison="==", finding=f"{model}: a good request failed before any malformed one: "
                                               f"{before.error}")
        if not before.ok:
            continue
        config = client.model_config(model)
        sequence = client.is_sequence_model(model)
        cases = build_cases(model, before.inputs, config, oversize, sequence)
        if large_refused:
            cases = [c for c in cases if c.name != "oversize payload"]
            table.append(f"{model:20} oversize payload: not sent (large_payloads is not allowed)")
        if first_good_body is None:
            from pytest_triton_ready.security.malformed import json_tensor

            first_good_body = json.dumps({"inputs": [json_tensor(n, a) for n, a in before.inputs.items()]}).encode()
        if int(config.get("max_batch_size") or 0) == 0:
            table.append(f"{model:20} batch above max_batch_size: not applicable, max_batch_size is 0")
        for case in cases:
            judge(*send(case))
        after = client.infer(model)
        check.measure("good request after", "ok" if after.ok else "failed", model=model, threshold="ok",
                      comparison="==", finding=f"{model}: a good request failed after the malformed ones: "
                                               f"{after.error}")
    if first_good_body is not None:
        judge(*send(unknown_model_case(first_good_body)))
    check.evidence("malformed requests (model, case, HTTP status, outcome, time, request, answer)", "\n".join(table))
    if any(f.rule == "invalid JSON" and "HTTP 5" in f.message for f in check.errors):
        check.recommend("Triton reports a request body that is not valid JSON as an internal error (HTTP 500; server "
                        "issue #8762): reject malformed JSON where the traffic enters (an ingress or proxy that "
                        "validates request bodies), or waive SEC-3 under gate.waivers naming that limitation.")
    if any(f.rule == "oversize payload" and f.severity == "error" for f in check.errors):
        check.recommend("Bound the model's variable input dimensions in config.pbtxt (dims), or cap the request "
                        "body size where the traffic enters (e.g. the ingress' maximum body size).")
    if large_refused:
        if check.errors:
            check.finding(large_refused, severity="warning", rule="attach.allow")
        else:
            check.incomplete(large_refused)


def _malformed_streams(triton, check, model, oversize, large_refused, table):
    """SEC-3's cases for one decoupled model, each on its own gRPC stream (security/malformed_streams.py)."""
    from pytest_triton_ready.load.streaming_requests import StreamingPlan
    from pytest_triton_ready.load.streaming_single import send_request
    from pytest_triton_ready.security.malformed_streams import good_request, send_case, streaming_cases

    client, grpc_url, headers = triton.client, triton.endpoints.grpc_url, triton.settings.headers
    plan = StreamingPlan.from_metadata(model, client.model_metadata(model), client.model_config(model),
                                      declared=client.declared)
    timeout = float(triton.settings.triton_request_timeout)

    def good(when):
        answer = send_request(grpc_url, good_request(plan, f"sec3-good-{when}"), plan.token_output,
                              timeout_s=timeout, headers=headers)
        ok = answer.final and answer.error is None
        check.measure(f"good request {when}", "ok" if ok else "failed", model=model, threshold="ok", comparison="==",
                      finding=f"{model}: a good streamed request failed {when} the malformed ones: "
                              f"{answer.error or 'no final response'}")
        return ok

    if not good("before"):
        return
    cases = streaming_cases(plan, client.model_config(model), oversize)
    if large_refused:
        cases = [c for c in cases if c.name != "oversize payload"]
        table.append(f"{model:20} oversize payload: not sent (large_payloads is not allowed)")
    for case in cases:
        answer = send_case(grpc_url, case, plan.token_output, timeout_s=timeout, headers=headers)
        table.append(f"{model:20} (gRPC stream) {answer.line()}")
        check.measure(case.name, answer.outcome, model=model)
        if answer.outcome == ACCEPTED:
            check.finding(f"{model}: the {case.name} request was accepted over the stream ({answer.tokens} tokens "
                          f"and the final response): {case.detail}", model=model, rule=case.name)
        elif answer.outcome == NO_ANSWER:
            check.finding(f"{model}: the {case.name} request got neither an error nor a final response within "
                          f"{timeout:g} s", model=model, rule=case.name)
        healthy = _server_healthy(triton)
        if healthy is not True:
            check.finding(f"after the {case.name} request to {model}: {healthy}", model=model,
                          rule="server stays live and ready")
    good("after")


def _server_healthy(triton):
    """True, or a sentence saying what got worse in the server's liveness or readiness since the
    run started (a /v2/health/ready at 400 from the start, one model having failed to load, is
    CFG-1's finding: here the models READY at the start must still be READY)."""
    from pytest_triton_ready.models import initial_state_of, ready_names

    client = triton.client
    try:
        live, ready = client.get_status("/v2/health/live"), client.get_status("/v2/health/ready")
        ready_now = None if ready == 200 else ready_names(client)
    except ConnectionError as exc:
        return f"the server does not answer: {exc}"
    worse = initial_state_of(triton).health_after(live == 200, ready, ready_now)
    return f"{worse}" if worse else True


@pytest.mark.triton_check("SEC-4")
def test_secrets_stay_out_of_outputs(triton_settings, triton_run, check):
    """No header value or token from the settings appears in what this run shows: the results of
    every earlier check, the settings and context written to the report, and the server log."""
    secrets, too_short = searchable(labelled_secrets(triton_settings.headers, triton_settings.secrets()))
    for label in too_short:
        check.finding(f"the {label} is too short to search for reliably", severity="warning")
    if not secrets:
        check.not_applicable("the settings carry no header value or token to keep secret")
    sources = [(f"result of {r.check_id} ({r.nodeid.split('::')[-1]})", json.dumps(r.to_dict(), default=str))
               for r in triton_run.results]
    sources.append(("settings as reported", json.dumps(triton_settings.redacted(), default=str)))
    sources.append(("report context", json.dumps(triton_run.context or {}, default=str)))
    target = triton_run.target
    if target is not None and target.owns_process:
        sources.append(("server log", target.server_log(10**6)))
    check.measure("sources searched", len(sources), "sources")
    check.measure("secrets searched for", len(secrets), "values")
    leaks = find_leaks(secrets, sources)
    check.measure("leaks found", len(leaks), "places", threshold=0,
                  finding=f"secret values appear in {len(leaks)} place(s) this run shows")
    for leak in leaks:
        check.finding(f"the {leak.secret} appears in the {leak.source}", rule="SEC-4")
    if leaks:
        check.recommend("Find where the value is written (an error message, evidence, a log line) and redact it "
                        "there; rotate the credential.")
    plain = urlsplit(target.endpoints.http_url if target else (triton_settings.triton_url or ""))
    if plain.scheme == "http" and plain.hostname and not is_loopback(plain.hostname):
        check.finding(f"the run sends its credentials over plain http to {plain.hostname}: anyone on the path "
                      "can read them", severity="warning", rule="SEC-2")
    check.evidence("searched", "\n".join(name for name, _ in sources))
