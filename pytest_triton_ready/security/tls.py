"""SEC-2: does an endpoint speak TLS, and what certificate does it present.

The handshake is done twice at most: once verifying the chain and the host name (against
`ca_file` or the system's trust store), and, when that fails, once more without verification so
the certificate can still be read and reported. Certificates are parsed with `cryptography`.
"""

from __future__ import annotations

import datetime as dt
import socket
import ssl
from dataclasses import dataclass, field

from ..errors import TritonReadyError
from .schema import TlsSettings


class TLSNotOffered(TritonReadyError, ConnectionError):
    """The endpoint answers, but not with a TLS handshake (a plaintext server)."""


@dataclass
class CertificateReport:
    """What one endpoint's TLS handshake showed."""

    endpoint: str
    protocol: str
    cipher: str
    subject: str
    issuer: str
    not_before: dt.datetime
    not_after: dt.datetime
    names: list[str] = field(default_factory=list)
    verified: bool = False
    verify_error: str | None = None

    def days_left(self, now: dt.datetime | None = None) -> float:
        now = now or dt.datetime.now(dt.timezone.utc)
        return round((self.not_after - now).total_seconds() / 86400, 1)

    def not_yet_valid(self, now: dt.datetime | None = None) -> bool:
        return (now or dt.datetime.now(dt.timezone.utc)) < self.not_before

    @property
    def self_signed(self) -> bool:
        return self.subject == self.issuer

    def describe(self) -> str:
        return "\n".join([
            f"endpoint:   {self.endpoint}",
            f"protocol:   {self.protocol}, cipher {self.cipher}",
            f"subject:    {self.subject}",
            f"issuer:     {self.issuer}" + (" (self-signed)" if self.self_signed else ""),
            f"names:      {', '.join(self.names) or '-'}",
            f"valid:      {self.not_before.isoformat()} to {self.not_after.isoformat()}",
            f"verified:   {'yes' if self.verified else 'no: ' + (self.verify_error or 'unknown reason')}",
        ])


def inspect_tls(host: str, port: int, server_name: str | None = None, ca_file: str | None = None,
                timeout_s: float = 5.0) -> CertificateReport:
    """Handshake with host:port and read its certificate. Raises TLSNotOffered for a plaintext
    endpoint and OSError when nothing listens."""
    name = server_name or host
    verify = ssl.create_default_context(cafile=ca_file)
    try:
        der, protocol, cipher = _handshake(host, port, name, verify, timeout_s)
        verified, error = True, None
    except ssl.SSLCertVerificationError as exc:
        verified, error = False, exc.verify_message or str(exc)
        der, protocol, cipher = _handshake(host, port, name, _unverified_context(), timeout_s)
    return _report(f"{host}:{port}", der, protocol, cipher, verified, error)


def _unverified_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _handshake(host: str, port: int, name: str, context: ssl.SSLContext, timeout_s: float) -> tuple[bytes, str, str]:
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        try:
            with context.wrap_socket(raw, server_hostname=name) as tls:
                return tls.getpeercert(binary_form=True), tls.version() or "?", (tls.cipher() or ("?",))[0]
        except ssl.SSLCertVerificationError:
            raise
        except (TimeoutError, ssl.SSLError, ConnectionResetError, EOFError) as exc:
            raise TLSNotOffered(f"{host}:{port} does not complete a TLS handshake ({_short(exc)})") from None


def _short(exc: BaseException) -> str:
    return getattr(exc, "reason", None) or str(exc) or type(exc).__name__


def _report(endpoint: str, der: bytes, protocol: str, cipher: str, verified: bool, error: str | None) -> CertificateReport:
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = [str(n) for n in san.get_values_for_type(x509.DNSName)]
        names += [str(n) for n in san.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        names = []
    return CertificateReport(
        endpoint=endpoint, protocol=protocol, cipher=cipher,
        subject=cert.subject.rfc4514_string(), issuer=cert.issuer.rfc4514_string(),
        not_before=cert.not_valid_before_utc, not_after=cert.not_valid_after_utc,
        names=names, verified=verified, verify_error=error,
    )


def tls_settings(settings):
    """`security.tls`, or its declared defaults where the section leaves it out."""
    return settings.section_model("security").tls or TlsSettings()


def ssl_context(settings) -> ssl.SSLContext | None:
    """A context trusting `security.tls.ca_file`; None (the system's trust) where none is set."""
    ca_file = tls_settings(settings).ca_file
    return ssl.create_default_context(cafile=ca_file) if ca_file else None
