"""What each fault experiment measured. The experiments fill these in; the checks compare them
with thresholds and the report draws their timelines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .timeline import SteadyState, chart_markers, chart_series, split_errors

NOTHING_IN_FLIGHT = "nothing was in flight at SIGTERM: the drain was not exercised"


@dataclass
class Outcome:
    """Common to every experiment: the traffic it ran, the steady state before the fault, and a
    reason when it could not run validly (then the check is INCOMPLETE, never PASS)."""

    experiment: str
    model: str | None = None
    traffic: Any = None  # load.TrafficResult
    steady: SteadyState | None = None
    incomplete: str | None = None
    notes: list[str] = field(default_factory=list)
    restore_error: str | None = None  # the server could not be brought back for later checks
    restore_advice: str | None = None  # then: what state it may be left in, and what to do
    declared_by: str | None = None  # attach.fault_actions.<kind> when a declared action caused the fault
    action_error: str | None = None  # a declared command failed or timed out: what it did
    commands: list[Any] = field(default_factory=list)  # declared.CommandResult of every command run

    @property
    def bins(self) -> list[Any]:
        return list(self.traffic.timeline.bins) if self.traffic is not None and self.traffic.timeline else []

    @property
    def events(self) -> list[Any]:
        return list(self.traffic.timeline.events) if self.traffic is not None and self.traffic.timeline else []

    @property
    def errors_by_reason(self) -> dict[str, int]:
        return dict(self.traffic.stats.errors) if self.traffic is not None else {}

    def restore_finding(self) -> str | None:
        """The error finding of a failed restore: what failed, the state the server may be left in,
        what to do. None when the restore succeeded (or was not needed)."""
        if not self.restore_error:
            return None
        advice = f"; {self.restore_advice}" if self.restore_advice else ""
        return (f"the server could not be restored after the {self.experiment} ({self.restore_error}){advice}; "
                "the checks after this one may fail because of it")

    def chart(self) -> tuple[dict[str, list[tuple[float, float]]], list[dict[str, Any]]]:
        return chart_series(self.bins), chart_markers(self.events)

    def summary(self) -> dict[str, Any]:
        """JSON-ready numbers, for evidence and for facts other checks read."""
        data = {k: v for k, v in vars(self).items()
                if k not in ("traffic", "steady", "notes", "restore_advice", "commands")}
        if self.commands:
            data["commands"] = [c.to_dict() for c in self.commands]
        if self.traffic is not None:
            stats = self.traffic.stats
            data["traffic"] = {"ok": stats.count_ok, "errors": stats.count_errors, "dropped": stats.dropped,
                               "p50_ms": stats.p50_ms, "p99_ms": stats.p99_ms}
        if self.steady is not None:
            data["steady_state"] = vars(self.steady)
        return data


@dataclass
class ReloadOutcome(Outcome):
    """A forced reload (config override) or a new version rolled out, under traffic."""

    failed_requests: int = 0
    reload_call_s: float | None = None  # the load request, until it returned
    serve_s: float | None = None  # from the request until the reloaded (or new) version answered
    baseline_p99_ms: float | None = None
    peak_p99_ms: float | None = None
    old_version: str | None = None
    new_version: str | None = None
    old_version_state: str | None = None

    @property
    def passed_zero_downtime(self) -> bool:
        return self.incomplete is None and self.failed_requests == 0 and self.serve_s is not None


@dataclass
class InstanceRestartOutcome(Outcome):
    """One model instance (a python backend stub) killed, what clients and probes saw, and the
    recovery by unload + load."""

    instance: str | None = None
    instances: int = 0
    failed_requests: int = 0  # from the kill to the end
    failed_while_dead: int = 0  # from the kill to the recovery action
    failed_during_recovery: int = 0  # from the recovery action (unload + load) to the end
    failure_share: float | None = None  # errors / answered while the instance was dead
    server_ready_while_dead: list[int] = field(default_factory=list)  # HTTP statuses seen
    model_ready_while_dead: list[int] = field(default_factory=list)
    probe_while_dead: str | None = None
    unhealthy_instances: list[str] = field(default_factory=list)
    restarted_by_server: bool | None = False  # None: the server's processes cannot be seen from here
    plain_load_recovered: bool | None = None
    recovery_s: float | None = None  # from unload + load until every instance answered
    impact_s: float | None = None  # from the kill until clients saw clean service again
    server_died: str | None = None  # how the whole server went down after the kill of one stub

    @property
    def death_observed(self) -> bool:
        """The killed instance was seen dead: a probe named it unhealthy, a request failed, or the
        whole server went down with it."""
        return bool(self.unhealthy_instances) or self.failed_requests > 0 or self.server_died is not None

    @property
    def readiness_lied(self) -> bool:
        return self.death_observed and (200 in self.server_ready_while_dead or 200 in self.model_ready_while_dead)


@dataclass
class ServerRestartOutcome(Outcome):
    """The server SIGKILLed and started again by its launcher."""

    kill_s: float | None = None
    down_s: float | None = None  # from the kill until the server's URL stopped answering; None: it never did
    left_behind: list[int] | None = None  # None: this launcher's processes cannot be seen from here
    live_s: float | None = None  # all from the SIGKILL
    ready_s: float | None = None
    first_inference_s: float | None = None
    client_recovery_s: float | None = None  # until the traffic's own requests succeeded again
    failed_requests: int = 0


@dataclass
class ShutdownOutcome(Outcome):
    """SIGTERM under traffic: what was refused, what was lost, when readiness dropped, exit."""

    in_flight_at_sigterm: int = 0
    ready_drop_s: float | None = None
    exit_s: float | None = None
    exit_code: int | None = None
    exit_timeout_s: float | None = None
    lost: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    left_behind: list[int] | None = None  # None: this launcher's processes cannot be seen from here
    restart_s: float | None = None
    shutdown_log: str = ""  # the server's log from the signal to the exit

    @property
    def held_by_connections(self) -> bool:
        """Triton 2.51 waits for open HTTP connections before it stops the models."""
        return "HTTP service connections" in self.shutdown_log

    @property
    def lost_requests(self) -> int:
        return sum(self.lost.values())

    def classify(self, errors: dict[str, int]) -> None:
        self.refused, self.lost = split_errors(errors)
