"""What a fleet is: the load-balanced entry (the run's `--triton-url`) and its replicas.

The replicas come from the `fleet:` section, from exactly one source:

    fleet:
      replicas:                         # a list: plain URLs, or mappings with every endpoint
        - http://10.0.0.11:8000         #   gRPC and metrics default to ports 8001 / 8002
        - {name: triton-2, http_url: http://10.0.0.12:8000, grpc_url: 10.0.0.12:8001,
           metrics_url: http://10.0.0.12:8002/metrics, weight: 1}
      replicas_command: "kubectl get endpoints triton -o jsonpath=..."   # or a command printing URLs
      kubernetes: {namespace: serving, service: triton}                  # or the Endpoints of a Service

A fleet with no replicas (no `fleet:` section at all) is not a fleet: the fleet checks are then
NOT APPLICABLE. Each replica is reached directly (bypassing the balancer) for the per-replica and
consistency checks and for its own counters; the load goes through the balancer.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from ..addresses import load_cluster
from ..errors import TritonReadyError
from ..yamlschema import Section, setting


def _cluster_address(value: str | None) -> str | None:
    if value is not None:
        load_cluster(value)  # the option's own parser
    return value


class ReplicaEntry(Section):
    """One replica, with every endpoint spelled out (as a mapping in `fleet.replicas`)."""

    http_url: str = Field(min_length=1, description="the replica's own HTTP URL, bypassing the balancer")
    name: str | None = setting(None, "a name for the report (default: host:port of http_url)")
    grpc_url: str | None = setting(None, "the replica's gRPC host:port (default: its host, port 8001)")
    metrics_url: str | None = setting(None, "the replica's metrics URL (default: its host, port 8002, /metrics)")
    weight: float = setting(1.0, "its weight in the balancer: its expected share of the traffic is weight / sum", gt=0)
    kill: str | None = setting(None, "PERF-4 replica death: a command that kills this replica (a declared action)")
    restore: str | None = setting(None, "a command that brings this replica back after the experiment")


class KubernetesDiscovery(Section):
    """`fleet.kubernetes`: the replicas are the ready addresses of a Service's Endpoints."""

    namespace: str = Field(min_length=1, description="the Service's namespace")
    service: str = Field(min_length=1, description="the Service whose Endpoints are the replicas")
    http_port: str = setting("http", "the Endpoints port (name or number) serving HTTP")
    grpc_port: str = setting("grpc", "the Endpoints port (name or number) serving gRPC")
    metrics_port: str = setting("metrics", "the Endpoints port (name or number) serving metrics")
    in_cluster: bool = setting(False, "use the pod's service account instead of ~/.kube/config")


class FleetSection(Section):
    """`fleet:`: the replicas behind the load balancer that `--triton-url` names (CFG-5, PERF-6, PERF-4)."""

    replicas: list[str | ReplicaEntry] = setting(list, "the replicas: URLs, or mappings with name, http_url, "
                                                       "grpc_url, metrics_url, weight, kill, restore")
    replicas_command: str | None = setting(None, "a command that prints the replicas' HTTP URLs, one per line "
                                                 "or separated by spaces")
    kubernetes: KubernetesDiscovery | None = setting(None, "discover the replicas from a Kubernetes Service's Endpoints")
    grpc_port: int = setting(8001, "gRPC port of replicas given as bare URLs", ge=1, le=65535)
    metrics_port: int = setting(8002, "metrics port of replicas given as bare URLs", ge=1, le=65535)
    models: list[str] = setting(list, "models to load the fleet with (default: the first READY stateless model)")
    concurrency: int = setting(8, "PERF-6: closed-loop concurrency per replica (the fleet gets replicas x this)", ge=1)
    spread_s: float = setting(4.0, "PERF-6: seconds of load through the balancer for the spread", unit="s", gt=0)
    death_rate_per_s: float = setting(60.0, "PERF-4 replica death: open-loop rate through the balancer",
                                      unit="requests/s", gt=0)
    death_steady_s: float = setting(2.0, "PERF-4 replica death: traffic before the kill", unit="s", gt=0)
    death_observe_s: float = setting(6.0, "PERF-4 replica death: traffic after the kill", unit="s", gt=0)
    death_replica: str | None = setting(None, "PERF-4 replica death: the replica to kill (default: the last)")
    kill_command: str | None = setting(None, "a command that kills a replica; {name}, {http_url}, {host} and "
                                             "{port} are filled in (a replica's own `kill` wins)")
    restore_command: str | None = setting(None, "a command that brings a replica back; same placeholders")
    load_cluster: Annotated[str | None, AfterValidator(_cluster_address)] = setting(
        None, "as --triton-load-cluster: the load engine's workers on a Ray cluster")

    @model_validator(mode="after")
    def _one_source(self) -> FleetSection:
        given = [n for n, v in (("replicas", self.replicas), ("replicas_command", self.replicas_command),
                                ("kubernetes", self.kubernetes)) if v]
        if len(given) > 1:
            raise ValueError(f"give the replicas one way, not {' and '.join(given)}")
        return self


class DiscoveryError(TritonReadyError, RuntimeError):
    """The replicas could not be found; the message is one line naming the source."""


@dataclass(frozen=True)
class Replica:
    """One replica of the fleet, reached directly."""

    name: str
    http_url: str
    grpc_url: str
    metrics_url: str
    weight: float = 1.0
    kill: str | None = None
    restore: str | None = None

    @property
    def host(self) -> str:
        return _split(self.http_url)[0]

    @property
    def port(self) -> int:
        return _split(self.http_url)[1]

    def command(self, template: str | None) -> str | None:
        if not template:
            return None
        return template.format(name=self.name, http_url=self.http_url, host=self.host, port=self.port)


@dataclass
class Fleet:
    """The balancer's entry and the replicas; `source` says where the replicas came from."""

    entry_http_url: str
    entry_grpc_url: str
    replicas: list[Replica]
    source: str
    section: FleetSection = field(default_factory=FleetSection)

    def replica(self, name: str) -> Replica:
        for replica in self.replicas:
            if replica.name == name:
                return replica
        raise KeyError(f"no replica named {name!r}; the fleet has {', '.join(r.name for r in self.replicas)}")

    def expected_shares(self) -> dict[str, float]:
        total = sum(r.weight for r in self.replicas)
        return {r.name: r.weight / total for r in self.replicas}


def _split(url: str) -> tuple[str, int]:
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"http://{url}")
    return parts.hostname or "localhost", parts.port or (443 if parts.scheme == "https" else 80)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def replica_from_url(url: str, section: FleetSection) -> Replica:
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    host, port = _split(url)
    scheme = url.split("://", 1)[0]
    return Replica(f"{_bracket(host)}:{port}", url, f"{_bracket(host)}:{section.grpc_port}",
                   f"{scheme}://{_bracket(host)}:{section.metrics_port}/metrics",
                   kill=section.kill_command, restore=section.restore_command)


def replica_from_entry(entry: ReplicaEntry, section: FleetSection) -> Replica:
    base = replica_from_url(entry.http_url, section)
    return Replica(entry.name or base.name, base.http_url, entry.grpc_url or base.grpc_url,
                   entry.metrics_url or base.metrics_url, entry.weight,
                   entry.kill or section.kill_command, entry.restore or section.restore_command)


def urls_from_command(command: str, timeout_s: float = 30.0) -> list[str]:
    """Run `command` (no shell unless it needs one) through the one command runner and read URLs
    from what it prints."""
    from ..commands import run_command

    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise DiscoveryError(f"fleet.replicas_command {command!r} could not run: {exc}") from None
    needs_shell = any(c in command for c in "|;&$`><")
    done = run_command(command if needs_shell else argv, "fleet.replicas_command", timeout_s=timeout_s)
    if not done.ok:
        raise DiscoveryError(done.problem())
    urls = [u.strip(",;") for u in done.stdout.replace(",", " ").split() if u.strip(",;")]
    if not urls:
        raise DiscoveryError(f"fleet.replicas_command {command!r} printed no replica URL")
    return urls



def section_from(settings: Any) -> FleetSection:
    return settings.section_model("fleet")
