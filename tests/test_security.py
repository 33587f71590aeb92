"""SEC-1..SEC-4 through pytester against real servers: the open demo server, one started with
restricted APIs (the admin key is the secret SEC-4 hunts for), TLS relays with self-signed
certificates (in front of the demo server, and Triton's own gRPC TLS), and a model that stays broken after an oversize request."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

# Imported here, once: pytester's in-process runs unload the modules they import, and importing a
# C extension (grpc, cryptography) a second time in one process crashes it.
import cryptography.x509  # noqa: F401
import pytest
import tritonclient.grpc  # noqa: F401
from tlstools import TLSRelay, self_signed

from conftest import QUICK_CHECKLIST, TEST_REPOSITORIES
from pytest_triton_ready.launchers.embedded import EmbeddedLauncher

SENTINEL = f"sentinel-{uuid.uuid4().hex}"
RESTRICTED = "model-repository,shared-memory,logging,trace"


def endpoint_args(launcher) -> tuple[str, ...]:
    endpoints = launcher.endpoints
    return (f"--triton-grpc-url={endpoints.grpc_url}", f"--triton-metrics-url={endpoints.metrics_url}")


def findings(result: dict, severity: str = "error") -> list[str]:
    return [f["message"] for f in result["findings"] if f["severity"] == severity]


def values(result: dict, name: str) -> dict:
    """{model: value} of one measurement name."""
    return {m["model"]: m["value"] for m in result["measurements"] if m["name"] == name}


def settings_file(pytester, text: str) -> str:
    path = pytester.path / "triton-ready.yaml"
    path.write_text(textwrap.dedent(text))
    return f"--triton-config={path}"


@pytest.fixture(scope="module")
def restricted_server():
    """A real tritonserver whose repository, shared-memory, logging and trace APIs need the
    `admin-key` header, over HTTP and gRPC; the key is SENTINEL."""
    launcher = EmbeddedLauncher(extra_args=[f"--http-restricted-api={RESTRICTED}:admin-key={SENTINEL}",
                                            f"--grpc-restricted-protocol={RESTRICTED}:admin-key={SENTINEL}"])
    launcher.start()
    yield launcher
    launcher.cleanup()


# -- SEC-1 ---------------------------------------------------------------------------------------
def test_open_apis_fail_sec1_and_the_probes_change_nothing(run_checklist, demo_server):
    from pytest_triton_ready.server.client import TritonClient

    client = TritonClient(demo_server.endpoints.http_url, demo_server.endpoints.grpc_url)
    before = client.repository_index()
    run = run_checklist("test_security.py", args=("-k", "restricted"))
    run.outcome.assert_outcomes(failed=1)
    sec1 = run.result("test_restricted_apis_need_credentials")
    assert sec1["verdict"] == "fail"
    assert sorted(findings(sec1)) == sorted(f"the {api} API answers without credentials over GRPC and HTTP"
                                            for api in RESTRICTED.split(","))
    states = values(sec1, "model-repository API") | values(sec1, "statistics API")
    assert states == {None: "open"}
    probes = next(e["text"] for e in sec1["evidence"] if e["label"] == "model-repository probes")
    assert "/load: open (HTTP 500" in probes and "failed to poll from model repository" in probes
    assert "--http-restricted-api=model-repository,shared-memory,logging,trace:" in sec1["recommendations"][0]
    assert client.repository_index() == before
    client.close()


def test_restricted_apis_pass_sec1(run_checklist, restricted_server):
    run = run_checklist("test_security.py", url=restricted_server.endpoints.http_url,
                        args=(*endpoint_args(restricted_server), "-k", "restricted"))
    run.outcome.assert_outcomes(passed=1)
    sec1 = run.result("test_restricted_apis_need_credentials")
    measured = {m["name"]: (m["value"], m["passed"]) for m in sec1["measurements"]}
    for api in RESTRICTED.split(","):
        assert measured[f"{api} API"] == ("restricted", True)
    assert measured["inference API"] == ("open", None)  # reported, not required
    logging = next(e["text"] for e in sec1["evidence"] if e["label"] == "logging probes")
    assert "grpc LogSettings: restricted" in logging and "http GET /v2/logging: restricted (HTTP 403" in logging


def test_http_restricted_but_grpc_open_fails_sec1(run_checklist):
    launcher = EmbeddedLauncher(extra_args=[f"--http-restricted-api={RESTRICTED}:admin-key={SENTINEL}"])
    launcher.start()
    try:
        run = run_checklist("test_security.py", url=launcher.endpoints.http_url,
                            args=(*endpoint_args(launcher), "-k", "restricted"))
    finally:
        launcher.cleanup()
    sec1 = run.result("test_restricted_apis_need_credentials")
    assert sec1["verdict"] == "fail"
    assert "the model-repository API answers without credentials over GRPC" in findings(sec1)


# -- SEC-2 ---------------------------------------------------------------------------------------
@pytest.fixture
def certificates(tmp_path: Path):
    return {"soon": self_signed(tmp_path, "soon", valid_days=10),
            "expired": self_signed(tmp_path, "expired", valid_days=-2, started_days_ago=90)}


def relay_to(cert, url_or_address: str) -> TLSRelay:
    host_port = url_or_address.split("://")[-1]
    host, _, port = host_port.rpartition(":")
    return TLSRelay(cert[0], cert[1], (host, int(port)))


def test_tls_with_a_certificate_expiring_in_10_days_passes_with_a_warning(run_checklist, pytester, certificates):
    """gRPC: Triton's own TLS (--grpc-use-ssl); HTTP: a TLS-terminating relay in front of Triton."""
    cert = certificates["soon"]
    config = settings_file(pytester, f"""
        security:
          exposed_beyond_cluster: true
          tls: {{ca_file: {cert[0]}}}
    """)
    launcher = EmbeddedLauncher(extra_args=["--grpc-use-ssl=true", f"--grpc-server-cert={cert[0]}",
                                            f"--grpc-server-key={cert[1]}"])
    launcher.start()
    try:
        with relay_to(cert, launcher.endpoints.http_url) as http:
            run = run_checklist("test_security.py", url=f"https://127.0.0.1:{http.port}",
                                args=(config, f"--triton-grpc-url={launcher.endpoints.grpc_url}", "-k", "transport"))
    finally:
        launcher.cleanup()
    run.outcome.assert_outcomes(passed=1)
    sec2 = run.result("test_transport_uses_tls_when_exposed")
    assert sec2["verdict"] == "pass"
    assert values(sec2, "certificate verifies") == {"HTTP": True, "gRPC": True}
    days = values(sec2, "days until certificate expiry")
    assert set(days) == {"HTTP", "gRPC"} and all(9.9 <= d <= 10.0 for d in days.values())
    warnings = findings(sec2, "warning")
    assert len(warnings) == 2 and all("within the warning period of 30 days" in w for w in warnings)
    described = next(e["text"] for e in sec2["evidence"] if e["label"] == "gRPC certificate")
    assert "(self-signed)" in described and "127.0.0.1" in described and "verified:   yes" in described


def test_plain_http_and_plaintext_grpc_fail_when_exposed(run_checklist, pytester):
    config = settings_file(pytester, """
        security:
          exposed_beyond_cluster: true
    """)
    run = run_checklist("test_security.py", args=(config, "-k", "transport"))
    run.outcome.assert_outcomes(failed=1)
    sec2 = run.result("test_transport_uses_tls_when_exposed")
    problems = findings(sec2)
    assert any(p.startswith("HTTP is plain http (http://127.0.0.1:") for p in problems)
    assert any(p.startswith("gRPC: 127.0.0.1:") and p.endswith("the endpoint is plaintext") for p in problems)


def test_expired_untrusted_certificate_fails(run_checklist, pytester, demo_server, certificates):
    config = settings_file(pytester, """
        security:
          exposed_beyond_cluster: true
          tls: {grpc: false}
    """)
    with relay_to(certificates["expired"], demo_server.endpoints.http_url) as http:
        run = run_checklist("test_security.py", url=f"https://127.0.0.1:{http.port}", args=(config, "-k", "transport"))
    sec2 = run.result("test_transport_uses_tls_when_exposed")
    assert sec2["verdict"] == "fail"
    problems = findings(sec2)
    assert any(p.startswith("HTTP: the certificate does not verify: ") for p in problems)
    assert any(p.startswith("HTTP: the certificate expired on ") for p in problems)
    assert values(sec2, "days until certificate expiry")["HTTP"] < 0


def test_tls_not_required_inside_the_cluster(run_checklist, pytester):
    config = settings_file(pytester, """
        security:
          exposed_beyond_cluster: false
    """)
    run = run_checklist("test_security.py", args=(config, "-k", "transport"))
    sec2 = run.result("test_transport_uses_tls_when_exposed")
    assert sec2["verdict"] == "not_applicable"
    assert sec2["reason"].startswith("security.exposed_beyond_cluster is false")


# -- SEC-3 ---------------------------------------------------------------------------------------
def test_bounded_models_refuse_every_malformed_request(run_checklist):
    """Every case but one gets a clean 400/404; Triton 2.51 answers a body cut in half with HTTP 500
    (it reports a request-JSON parse failure as INTERNAL, server issue #8762), which fails SEC-3."""
    run = run_checklist("test_security.py", url="own", args=("-k", "malformed"))
    run.outcome.assert_outcomes(failed=1)
    sec3 = run.result("test_malformed_requests_get_clean_errors")
    assert sec3["verdict"] == "fail"
    errors = findings(sec3)
    assert sorted(e.split(":")[0] for e in errors) == ["accumulate", "cached_sum", "scale"], errors
    assert all("the invalid JSON request is refused with HTTP 500, a server error for a client's mistake" in e
               for e in errors), errors
    assert any("issue #8762" in r for r in sec3["recommendations"]), sec3["recommendations"]
    for model in ("scale", "cached_sum", "accumulate"):
        statuses = {m["name"]: m["value"] for m in sec3["measurements"] if m["model"] == model}
        assert statuses["good request before"] == statuses["good request after"] == "ok"
        for case in ("wrong datatype", "wrong shape", "missing input", "oversize payload",
                     "batch above max_batch_size"):
            assert statuses[case] == 400, (model, case)
        assert statuses["invalid JSON"] == 500  # Triton 2.51 answers a parse error with 500: a failure
    assert [m["value"] for m in sec3["measurements"] if m["name"] == "unknown model"] == [404]
    table = next(e["text"] for e in sec3["evidence"] if e["label"].startswith("malformed requests"))
    assert len(table.splitlines()) == 3 * 6 + 1


def test_a_model_accepting_an_oversize_payload_fails_sec3(run_checklist):
    repository = TEST_REPOSITORIES / "unbounded"
    run = run_checklist("test_security.py", url=None,
                        args=("-k", "malformed", "--triton-launch=embedded", f"--triton-model-repository={repository}"))
    run.outcome.assert_outcomes(failed=1)
    sec3 = run.result("test_malformed_requests_get_clean_errors")
    assert [f for f in findings(sec3) if "invalid JSON" not in f] == [
        "unbounded: the oversize payload request was accepted (HTTP 200): INPUT0 shape [1, 20971520], 80 MiB"]
    assert any("Bound the model's variable input dimensions" in r for r in sec3["recommendations"])


def test_a_model_broken_by_a_malformed_request_fails_sec3(run_checklist):
    repository = TEST_REPOSITORIES / "fragile"
    run = run_checklist("test_security.py", url=None,
                        args=("-k", "malformed", "--triton-launch=embedded", f"--triton-model-repository={repository}",
                              "--triton-threshold=malformed_oversize_payload_mib=8"))
    sec3 = run.result("test_malformed_requests_get_clean_errors")
    assert sec3["verdict"] == "fail"
    problems = findings(sec3)
    assert any(p.startswith("fragile: a good request failed after the malformed ones: ") and "out of memory" in p
               for p in problems)
    statuses = {m["name"]: m["value"] for m in sec3["measurements"] if m["model"] == "fragile"}
    assert statuses["good request before"] == "ok" and statuses["oversize payload"] >= 400


# -- SEC-4 ---------------------------------------------------------------------------------------
def test_a_full_checklist_run_leaks_the_admin_key_nowhere(run_checklist, pytester, restricted_server):
    junit = pytester.path / "junit.xml"
    run = run_checklist(url=restricted_server.endpoints.http_url, subprocess=True,
                        args=(*endpoint_args(restricted_server), f"--triton-header=admin-key: {SENTINEL}",
                              f"--junitxml={junit}", f"--triton-config={QUICK_CHECKLIST}", "-rA", "-v"))
    # CFG-1 and SEC-* as the unary config and security files judge them (the streaming and fleet
    # files carry the same ids and say not applicable here: no decoupled model, no fleet)
    results = {r["check_id"]: r["verdict"] for r in run.report["results"]
               if r["nodeid"].split("::")[0].endswith(("test_config.py", "test_security.py"))}
    assert results["CFG-1"] == "pass"  # the repository index needed the admin key: it was sent
    assert results["SEC-1"] == "pass" and results["SEC-4"] == "pass"
    sec4 = run.result("test_secrets_stay_out_of_outputs")
    searched = next(e["text"] for e in sec4["evidence"] if e["label"] == "searched").splitlines()
    assert any(s.startswith("result of SEC-3") for s in searched) and "settings as reported" in searched

    # every file the run left (report JSON/MD/HTML, JUnit XML, journals, logs), the terminal, the server log
    artifacts = {str(p.relative_to(pytester.path)): p.read_text(errors="replace")
                 for p in pytester.path.rglob("*") if p.is_file()}
    assert "report/readiness.json" in artifacts and "junit.xml" in artifacts
    artifacts["terminal"] = "\n".join(run.outcome.outlines + run.outcome.errlines)
    artifacts["server log"] = restricted_server.log_text(10**6)
    assert "test_secrets_stay_out_of_outputs PASSED" in artifacts["terminal"]
    assert 'name="test_secrets_stay_out_of_outputs"' in artifacts["junit.xml"]
    assert len(artifacts["server log"].splitlines()) > 20
    assert [name for name, text in artifacts.items() if SENTINEL in text] == []
    assert SENTINEL in " ".join(restricted_server.command())  # the search looks for a value that is real


def test_a_check_that_writes_a_header_value_fails_sec4(run_checklist, pytester):
    leaky = pytester.makepyfile(leaky_check="""
        import pytest

        @pytest.mark.triton_check("CFG-99", phase="config")
        def test_leaky(triton_settings, check):
            '''A check that wrongly keeps the request headers as evidence.'''
            check.evidence("request headers", repr(triton_settings.headers))
    """)
    run = run_checklist(str(leaky), "test_security.py",
                        args=("-k", "leaky or secrets", f"--triton-header=X-Api-Key: {SENTINEL}"))
    sec4 = run.result("test_secrets_stay_out_of_outputs")
    assert sec4["verdict"] == "fail"
    assert findings(sec4) == ["secret values appear in 1 place(s) this run shows",
                              "the value of header 'X-Api-Key' appears in the result of CFG-99 (test_leaky)"]
    assert SENTINEL not in str(sec4)


def test_sec4_is_not_applicable_without_secrets(run_checklist):
    run = run_checklist("test_security.py", args=("-k", "secrets"))
    sec4 = run.result("test_secrets_stay_out_of_outputs")
    assert sec4["verdict"] == "not_applicable"


def test_secrets_from_every_source_reach_no_artifact_and_no_stream(run_checklist, pytester, demo_server, monkeypatch):
    """A header from an environment variable, one from a YAML `${VAR}`, URL credentials, and a check
    that quotes a header in a finding, a failed assertion's locals (-l) and its printed output:
    none of the values appears in any file or stream the run leaves."""
    from_env, from_yaml, password = (f"{kind}-{uuid.uuid4().hex}" for kind in ("env", "yaml", "pw"))
    leaky = pytester.makepyfile(quoting_check="""
        import pytest

        @pytest.mark.triton_check("CFG-98", phase="config")
        def test_quotes_the_header(triton_settings, check):
            '''A check that wrongly quotes a header value in a finding and in its failure.'''
            token = triton_settings.headers["X-Api-Key"]
            print("sending", token)
            check.finding(f"the server refused key {token}")
            assert token == "something else"
    """)
    config = pytester.path / "secrets.yaml"
    config.write_text("server:\n  headers: {X-Yaml-Key: \"${YAML_KEY}\"}\nsoak: {window: 1s, warmup: 0s}\n")
    endpoints = demo_server.endpoints
    url = endpoints.http_url.replace("http://", f"http://ops:{password}@")
    junit = pytester.path / "junit.xml"
    monkeypatch.setenv("API_KEY", from_env)
    monkeypatch.setenv("YAML_KEY", from_yaml)
    run = run_checklist(str(leaky), "test_security.py", "test_soak.py", url=url, args=(
        f"--triton-grpc-url={endpoints.grpc_url}", f"--triton-metrics-url={endpoints.metrics_url}",
        "--triton-header-env=X-Api-Key=API_KEY", f"--triton-config={config}", f"--junitxml={junit}",
        "--triton-soak=2s", "--triton-models=scale", "-l", "-rA", "-v"))
    sec4 = run.result("test_secrets_stay_out_of_outputs")
    assert sec4["verdict"] == "fail"  # the quoting check's own result held the value
    assert "the value of header 'X-Api-Key' appears in the result of CFG-98 (test_quotes_the_header)" in [
        f["message"] for f in sec4["findings"]]
    artifacts = {str(p.relative_to(pytester.path)): p.read_text(errors="replace")
                 for p in pytester.path.rglob("*") if p.is_file() and p.suffix != ".py"}
    assert {"report/readiness.json", "report/readiness.md", "report/readiness.html", "junit.xml"} <= set(artifacts)
    assert any("journal" in name for name in artifacts), sorted(artifacts)
    artifacts["terminal"] = "\n".join(run.outcome.outlines + run.outcome.errlines)
    # the failed assertion of the leaky check shows the header's value masked, not its text
    shown = [line for line in artifacts["terminal"].splitlines() if "== 'something else'" in line]
    assert shown and all("***" in line for line in shown), shown
    for secret in (from_env, from_yaml, password):
        assert [name for name, text in artifacts.items() if secret in text] == [], secret
