"""The fleet a run checks: the resolved replicas with a direct client each, or the reason there is
none to check (no `fleet:` replicas, replicas that could not be found, or a URL seen to reach
several servers that the settings do not name)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..load.server_side import several_servers
from ..record.recorder import CheckRecorder
from ..server.client import TritonClient
from ..server.models import is_decoupled, ready_models, ready_names
from .discovery import resolve_fleet
from .spread import ReplicaCounters, read_counters
from .targets import DiscoveryError, Fleet, Replica

if TYPE_CHECKING:
    from ..server.under_test import ServerUnderTest

STATISTICS_READS = 6


class FleetUnderTest:
    """The resolved fleet, a direct client per replica, and the model the fleet is loaded with."""

    def __init__(self, fleet: Fleet, settings: Any) -> None:
        self.fleet = fleet
        self.settings = settings
        self.section = fleet.section
        self.clients = {r.name: TritonClient(r.http_url, r.grpc_url, settings.headers,
                                             settings.triton_request_timeout, settings.triton_dynamic_dim,
                                             settings.input_shapes, declared=settings.input_declarations())
                        for r in fleet.replicas}

    @property
    def replicas(self) -> list[Replica]:
        return self.fleet.replicas

    @property
    def balanced_concurrency(self) -> int:
        """The closed-loop concurrency through the balancer: fleet.concurrency per replica."""
        return self.section.concurrency * len(self.replicas)

    def engine(self, replica: Replica) -> Any:
        """A load engine that reaches `replica` directly, bypassing the balancer."""
        from ..load import LoadEngine

        return LoadEngine(self.clients[replica.name], replica.grpc_url, replica.http_url, self.settings.headers,
                          max(30.0, self.settings.triton_request_timeout), settings=self.settings)

    def choose_model(self, target: ServerUnderTest) -> str | None:
        """`fleet.models[0]` when READY on the balancer, else the first READY stateless model in scope."""
        ready = ready_names(target.client)
        if self.section.models:
            return self.section.models[0] if self.section.models[0] in ready else None
        for model in target.models():
            if model not in ready:
                continue
            config = target.client.model_config(model)
            if "sequence_batching" in config or is_decoupled(config):
                continue
            return model
        return None

    def counters(self, models: list[str]) -> dict[str, ReplicaCounters]:
        """Every replica's own success counters for `models` (metrics, statistics API as cross-check)."""
        timeout = self.settings.threshold("metrics_scrape_timeout_s").value
        return {r.name: read_counters(r, self.clients[r.name], models, self.settings.headers, timeout)
                for r in self.replicas}

    def describe(self) -> str:
        return "\n".join(f"{r.name}: http {r.http_url}, grpc {r.grpc_url}, metrics {r.metrics_url}, "
                         f"weight {r.weight:g}" for r in self.replicas) + f"\n(from {self.fleet.source})"

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def models_on_balancer(target: ServerUnderTest) -> list[str]:
    """The models in scope that are READY through the balancer, sorted: what every replica must serve."""
    return sorted(ready_names(target.client) & set(target.models()))


class UndeclaredFleet(str):
    """Why the URL is known to reach several servers although the settings name no replicas."""


def undeclared_fleet(target: ServerUnderTest) -> UndeclaredFleet | None:
    """One inference (so the servers' counters differ), then STATISTICS_READS reads of every model's
    statistics; a counter that goes backwards proves more than one server behind the URL. A server
    this run started is one server."""
    if target.owns_process:
        return None
    model = next(iter(ready_models(target)), None)
    if model is not None:
        target.client.infer(model)
    reads = []
    for _ in range(STATISTICS_READS):
        status, body = target.client.raw("/v2/models/stats")
        if status != 200:
            return None
        reads.append(body)
    proof = several_servers(reads)
    return None if proof is None else UndeclaredFleet(
        f"{target.endpoints.http_url} reaches more than one server ({STATISTICS_READS} reads of /v2/models/stats: "
        f"{proof}) but the settings name no replicas: name them under fleet.replicas, fleet.replicas_command or "
        "fleet.kubernetes (docs/fleet.md) so that each one is checked")


FleetOrReason = FleetUnderTest | DiscoveryError | UndeclaredFleet | None


def fleet_of(target: ServerUnderTest, settings: Any) -> FleetOrReason:
    """The fleet under test; a DiscoveryError when its replicas could not be found; None when the
    settings name no replicas and the URL shows one server; an UndeclaredFleet when it shows several."""
    try:
        resolved = resolve_fleet(settings.section_model("fleet"), target.endpoints.http_url, target.endpoints.grpc_url)
    except DiscoveryError as exc:
        return exc
    if resolved is None:
        return undeclared_fleet(target)
    return FleetUnderTest(resolved, settings)


def require_fleet(fleet: FleetOrReason, check: CheckRecorder) -> FleetUnderTest:
    """The fleet, with its replicas as evidence; INCOMPLETE when its replicas could not be found or
    the URL reaches servers the settings do not name; NOT APPLICABLE when there is no fleet."""
    if isinstance(fleet, DiscoveryError):
        check.incomplete(f"the fleet's replicas could not be found: {fleet}")
    if isinstance(fleet, UndeclaredFleet):
        check.incomplete(str(fleet))
    if fleet is None:
        check.not_applicable("no fleet: the settings name no replicas (fleet.replicas, fleet.replicas_command or "
                             "fleet.kubernetes)")
    check.evidence("replicas", fleet.describe())
    return fleet


def require_model(fleet: FleetUnderTest, target: ServerUnderTest, check: CheckRecorder) -> str:
    """The model to load the fleet with; INCOMPLETE when there is none."""
    model = fleet.choose_model(target)
    if model is None:
        check.incomplete("no READY stateless model to load the fleet with (set fleet.models)")
    return model
