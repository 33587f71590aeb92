"""Test helpers for SEC-2: self-signed certificates and a TLS-terminating relay on loopback.

The relay is what an ingress does in front of Triton: it accepts TLS on 127.0.0.1 and passes the
plaintext bytes on to the real server's HTTP or gRPC port.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
import threading
from pathlib import Path


def self_signed(directory: Path, name: str, valid_days: float, started_days_ago: float = 1) -> tuple[Path, Path]:
    """Write a self-signed certificate for 127.0.0.1/localhost and its key; returns (cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"triton-ready test {name}")])
    now = dt.datetime.now(dt.timezone.utc)
    not_before = now - dt.timedelta(days=started_days_ago)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before).not_valid_after(now + dt.timedelta(days=valid_days))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class TLSRelay:
    """Accepts TLS on a free loopback port and relays plaintext to `target` (host, port)."""

    def __init__(self, cert: Path, key: Path, target: tuple[str, int]) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.context.set_alpn_protocols(["h2", "http/1.1"])
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)  # so that the accept loop sees the end of the test
        self.port = self.listener.getsockname()[1]
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> TLSRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._closed.set()
        self._thread.join(timeout=5)
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(client, server_side=True)
        except (ssl.SSLError, OSError):
            client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            tls.close()
            return
        threading.Thread(target=_pipe, args=(upstream, tls), daemon=True).start()
        _pipe(tls, upstream)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
