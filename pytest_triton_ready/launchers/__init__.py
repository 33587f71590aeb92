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
