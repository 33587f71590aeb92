"""Launchers: who owns the server under test. `attach` owns nothing; the others start and stop it."""

from __future__ import annotations

from dataclasses import dataclass


class LaunchError(RuntimeError):
    """The server could not be started or reached; the message is one readable line."""


@dataclass(frozen=True)
class Endpoints:
    """Where the server answers."""

    http_url: str
    grpc_url: str
    metrics_url: str


RESPONSE_CACHE_BYTES = 16 * 1024 * 1024


def serving_flags(exit_timeout_s: int = 30) -> list[str]:
    """The tritonserver flags every launcher uses: explicit model control with every model loaded,
    failed models reported instead of fatal, strict readiness, latency summaries, the response
    cache, production log verbosity."""
    return [
        "--model-control-mode=explicit",
        "--load-model=*",
        "--exit-on-error=false",
        "--strict-readiness=true",
        "--metrics-config=summary_latencies=true",
        "--metrics-interval-ms=1000",
        f"--cache-config=local,size={RESPONSE_CACHE_BYTES}",
        f"--exit-timeout-secs={exit_timeout_s}",
        "--log-verbose=0",
    ]
