"""The YAML section `security:` (see docs/operations-security.md)."""

from __future__ import annotations

SECURITY_SCHEMA = {
    "exposed_beyond_cluster": bool,
    "restricted_apis": [str],
    "tls": {"ca_file": str, "server_name": str, "grpc": bool},
}
