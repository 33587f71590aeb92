"""Phase "security": beyond the review's list, what an exposed inference server must not allow.

SEC-1 restricted APIs, SEC-2 transport (TLS and certificates), SEC-3 malformed input, SEC-4 secrets
kept out of every output. No probe changes the server's models or settings (SEC-1's load and unload
name a model that does not exist). SEC-3's oversize payload is a large request body, which a model
with a variable dimension may execute: against an attached server it is sent only when
`attach.allow` has `large_payloads` (or the payload is under attach.max_payload_mib).
"""

import json
from urllib.parse import urlsplit

import pytest

from pytest_triton_ready.addresses import is_loopback
from pytest_triton_ready.security.api_audit import judge_restricted_apis
from pytest_triton_ready.security.malformed_probe import judge_malformed
from pytest_triton_ready.security.secrets import find_leaks, labelled_secrets, searchable
from pytest_triton_ready.security.transport import judge_transport
from pytest_triton_ready.target import declared_endpoints


@pytest.mark.triton_check("SEC-1")
def test_restricted_apis_need_credentials(triton, triton_settings, check):
    """The model-repository (load, unload), shared-memory, logging and trace APIs (or the list in
    security.restricted_apis) refuse a caller without credentials, over HTTP and gRPC. A required
    API that does not answer over a protocol is not judged restricted: the check is INCOMPLETE
    naming it (unless another API failed)."""
    judge_restricted_apis(check, triton, triton_settings)


@pytest.mark.triton_check("SEC-2")
def test_transport_uses_tls_when_exposed(triton_settings, check, request):
    """When security.exposed_beyond_cluster is true, HTTP is served over https and gRPC over TLS
    (unless security.tls.grpc is false), with certificates that verify and are in their validity
    period; a certificate expiring within tls_cert_expiry_warning_days is a warning."""
    endpoints = declared_endpoints(triton_settings) or request.getfixturevalue("triton").endpoints
    judge_transport(check, triton_settings, endpoints)


@pytest.mark.triton_check("SEC-3")
def test_malformed_requests_get_clean_errors(triton, triton_settings, check):
    """Every model refuses malformed requests (wrong datatype, wrong shape, missing input, oversize
    payload, invalid JSON, batch above max_batch_size; and an unknown model) with a clean error (a
    4xx with a message; a 5xx for a client's mistake fails),
    the server stays live and ready, and good requests before and after succeed. Decoupled
    (streaming) models get the same cases over gRPC ModelStreamInfer (raw bytes cut short instead
    of invalid JSON), where a clean refusal is an error inside the stream."""
    judge_malformed(check, triton, triton_settings)


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
