"""SEC-2 "transport uses TLS when exposed": which endpoints must speak TLS (from
security.exposed_beyond_cluster and the URLs), and each one's certificate judged
(checks/test_security.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..addresses import is_loopback
from .tls import CertificateReport, TLSNotOffered, inspect_tls, tls_settings

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder

OLD_PROTOCOLS = ("TLSv1", "TLSv1.1", "SSLv3")
HTTP_FIX = ("Terminate TLS in front of Triton's HTTP port (ingress or proxy) and point "
            "--triton-url at the https address.")
GRPC_FIX = ("Start tritonserver with --grpc-use-ssl=true --grpc-server-cert=... "
            "--grpc-server-key=..., or set security.tls.grpc: false if gRPC is not exposed.")
RENEW = "Renew the server certificate before it expires (automate it, e.g. cert-manager)."


@dataclass
class TransportPlan:
    """What SEC-2 inspects: (label, host, port) per TLS endpoint; a finding where HTTP is plain on an
    exposed server; or why the check does not apply (`undeclared`: INCOMPLETE, `not_required`:
    NOT APPLICABLE where nothing else was found)."""

    targets: list[tuple[str, str, int]] = field(default_factory=list)
    plain_http: str | None = None
    undeclared: str | None = None
    not_required: str | None = None


def transport_plan(http_url: str, grpc_url: str, exposed: bool | None, grpc_tls: bool) -> TransportPlan:
    """An https URL is always inspected; gRPC where the server is exposed and security.tls.grpc is
    on; plain http on an exposed server is a finding. Undeclared exposure is only assumed internal
    on loopback."""
    http = urlsplit(http_url)
    grpc_host, _, grpc_port = grpc_url.rpartition(":")
    plan = TransportPlan()
    if exposed is None and not is_loopback(http.hostname or ""):
        plan.undeclared = ("security.exposed_beyond_cluster is not declared, and the server is not on loopback: "
                           "say whether clients outside its cluster can reach it")
        return plan
    if http.scheme == "https":
        plan.targets.append(("HTTP", http.hostname, http.port or 443))
    elif exposed:
        plan.plain_http = f"HTTP is plain http ({http_url}) on a server reachable beyond its cluster"
    if exposed and grpc_tls:
        plan.targets.append(("gRPC", grpc_host.strip("[]"), int(grpc_port)))
    if not plan.targets:
        plan.not_required = ("security.exposed_beyond_cluster is false" if exposed is False else
                             "the server listens on loopback only and security.exposed_beyond_cluster is not declared")
    return plan


def judge_certificate(check: CheckRecorder, label: str, cert: CertificateReport, warn_days: Any) -> None:
    """The certificate verifies, is within its validity period (expiring within `warn_days` is a
    warning), and the handshake negotiated TLS 1.2 or newer."""
    check.evidence(f"{label} certificate", cert.describe())
    check.measure("certificate verifies", cert.verified, model=label, threshold=True, comparison="==",
                  finding=f"{label}: the certificate does not verify: {cert.verify_error}")
    check.measure("TLS protocol", cert.protocol, model=label)
    if cert.protocol in OLD_PROTOCOLS:
        check.finding(f"{label}: negotiated {cert.protocol}; TLS 1.2 or newer is required", model=label)
    if cert.not_yet_valid():
        check.finding(f"{label}: the certificate is not valid before {cert.not_before.isoformat()}", model=label)
    days = cert.days_left()
    expiry = cert.not_after.date().isoformat()
    if check.measure("days until certificate expiry", days, "days", model=label, threshold=0, comparison=">",
                     finding=f"{label}: the certificate expired on {expiry}") and days < warn_days.value:
        check.finding(f"{label}: the certificate expires in {days:g} days ({expiry}), within the warning period of "
                      f"{warn_days.value:g} days", severity="warning", model=label, rule="tls_cert_expiry_warning_days")
        check.recommend(RENEW)


def judge_transport(check: CheckRecorder, settings: Any, endpoints: Any) -> None:
    """SEC-2 on the declared (or the run's) endpoints."""
    exposed = settings.section_model("security").exposed_beyond_cluster
    tls = tls_settings(settings)
    check.measure("exposed beyond its cluster (declared)", "unknown" if exposed is None else str(exposed).lower())
    plan = transport_plan(endpoints.http_url, endpoints.grpc_url, exposed, tls.grpc)
    if plan.undeclared:
        check.incomplete(plan.undeclared)
    if plan.plain_http:
        check.finding(plan.plain_http, rule="SEC-2")
        check.recommend(HTTP_FIX)
    if plan.not_required and not check.errors:
        check.not_applicable(f"{plan.not_required}: TLS is not required, and no https endpoint to inspect")
    warn_days = check.threshold("tls_cert_expiry_warning_days")
    for label, host, port in plan.targets:
        try:
            cert = inspect_tls(host, port, tls.server_name, tls.ca_file, settings.triton_request_timeout)
        except TLSNotOffered as exc:
            check.finding(f"{label}: {exc}: the endpoint is plaintext", rule="SEC-2")
            if label == "gRPC":
                check.recommend(GRPC_FIX)
            continue
        except OSError as exc:
            check.finding(f"{label}: nothing answers at {host}:{port} ({exc})", rule="SEC-2")
            continue
        judge_certificate(check, label, cert, warn_days)
