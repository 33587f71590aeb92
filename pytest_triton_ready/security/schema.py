"""The YAML section `security:` (see docs/operations-security.md), declared once."""

from __future__ import annotations

from ..yamlschema import Section, setting


class TlsSettings(Section):
    ca_file: str | None = setting(None, "trust anchor for the server's certificate (default: system store)")
    server_name: str | None = setting(None, "name to verify (default: the URL's host)")
    grpc: bool = setting(True, "gRPC is exposed too and must use TLS")


class SecuritySection(Section):
    """`security:`: exposure, restricted APIs and TLS."""

    exposed_beyond_cluster: bool | None = setting(None, "the server is reachable from outside the cluster (SEC-2 then needs TLS)")
    restricted_apis: list[str] | None = setting(
        None, "API categories that must need credentials (SEC-1; default: model-repository, shared-memory, logging, trace)")
    tls: TlsSettings | None = setting(None, "how SEC-2 verifies TLS")
