"""PERF-4, fleet: one replica dies under traffic through the balancer, as an `Experiment` of the
one fault skeleton (faults/experiment.py).

Open-loop traffic goes through the balancer; after `death_steady_s` (and a steady state) the
replica's declared kill action runs through the one command runner (a command: `kubectl delete
pod ... --grace-period=0`, `kill -KILL ...`); traffic goes on for `death_observe_s` while the
replica's own live endpoint is watched. From the 100 ms timeline:

- requests lost: failed (and dropped) requests from the kill to the end;
- reroute time: from the kill to the end of the last bin with a failed request, i.e. how long the
  balancer kept sending some traffic to the dead replica (0 when it never failed a request:
  the balancer retried refused connections on another replica);
- the survivors served the rest: the traffic after the reroute succeeds.

A kill that did not take (the replica kept answering and no request failed) is INCOMPLETE, never
a pass. The restore action (if declared) runs afterwards, in the skeleton's `finally`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import progress
from ..commands import run_command
from ..faults.experiment import Experiment
from ..faults.outcomes import Outcome
from ..faults.probes import Watcher
from ..faults.schema import FaultPlan
from ..faults.timeline import event_time
from ..server.client import http_status

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder

KILL_TIMEOUT_S = 60.0
RESTORE_TIMEOUT_S = 180.0


@dataclass
class DeathOutcome(Outcome):
    """What the clients of the balancer saw while one replica died."""

    replica: str | None = None
    kill_command: str = ""
    restored: bool | None = None
    kill_at_s: float | None = None
    stopped_answering_s: float | None = None  # from the kill until the replica's live endpoint stopped answering 200
    attempted_after: int = 0
    lost_after: int = 0
    errors_before: int = 0
    reroute_s: float | None = None
    steady_success_rate: float | None = None
    after_reroute_success_rate: float | None = None

    @property
    def lost_fraction(self) -> float | None:
        return self.lost_after / self.attempted_after if self.attempted_after else None

    @property
    def death_observed(self) -> bool:
        """The replica was seen dead: it stopped answering, or requests through the balancer failed."""
        return self.stopped_answering_s is not None or self.lost_after > 0


@dataclass(frozen=True)
class DeathPlan:
    """The `fleet:` section's death timings, in the names the skeleton reads."""

    rate_per_s: float
    steady_s: float
    settle_s: float  # traffic through the survivors after the kill


def analyse(bins: list[Any], kill_at_s: float, outcome: DeathOutcome) -> None:
    """Fill in the numbers from the traffic's 100 ms bins (`Bin(t_s, ok, errors, dropped, ...)`)."""
    before = [b for b in bins if b.t_s < kill_at_s]
    after = [b for b in bins if b.t_s >= kill_at_s]
    ok_before = sum(b.ok for b in before)
    attempted_before = ok_before + sum(b.errors + b.dropped for b in before)
    outcome.errors_before = attempted_before - ok_before
    outcome.steady_success_rate = ok_before / attempted_before if attempted_before else None
    outcome.attempted_after = sum(b.ok + b.errors + b.dropped for b in after)
    outcome.lost_after = sum(b.errors + b.dropped for b in after)
    failing = [b for b in after if b.errors or b.dropped]
    if not failing:
        outcome.reroute_s = 0.0
        rest = after
    else:
        width = (after[1].t_s - after[0].t_s) if len(after) > 1 else 0.1
        last = failing[-1]
        outcome.reroute_s = round(max(0.0, last.t_s + width - kill_at_s), 3)
        rest = [b for b in after if b.t_s > last.t_s]
    attempted_rest = sum(b.ok + b.errors + b.dropped for b in rest)
    outcome.after_reroute_success_rate = (sum(b.ok for b in rest) / attempted_rest) if attempted_rest else None


class ReplicaDeath(Experiment):
    """Kill `replica` by its declared action under open-loop traffic through the balancer (`load`)."""

    name = "replica death"
    outcome_type = DeathOutcome

    def __init__(self, load: Any, replica: Any, model: str, section: Any, success_rate_min: float = 0.999,
                 protocol: str = "grpc") -> None:
        super().__init__(model, DeathPlan(section.death_rate_per_s, section.death_steady_s, section.death_observe_s),
                         success_rate_min)
        self.load, self.replica, self.protocol = load, replica, protocol
        self.outcome.replica, self.outcome.kill_command = replica.name, replica.kill or ""
        self.watcher: Watcher | None = None

    @property
    def label(self) -> str:
        return f"{self.name} ({self.replica.name})"

    @property
    def event(self) -> str:
        return f"kill {self.replica.name}"

    @property
    def settle_step(self) -> str:
        return f"killed; {self.settle_s:g} s of traffic through the survivors"

    def unavailable(self) -> str | None:
        if not self.replica.kill:
            return (f"no kill action declared for replica {self.replica.name} (fleet.kill_command, or `kill` on the "
                    "replica): the run does not own the replicas and will not guess how to kill one")
        return None

    def open_traffic(self) -> Any:
        # A late request is sent anyway, as in every fault experiment (FaultPlan.late_drop_s): on a busy
        # host the client's own hiccups must not count as requests the balancer lost, nor break the steady state.
        return self.load.open_loop(self.model, rate=self.plan.rate_per_s, protocol=self.protocol,
                                   late_drop_s=FaultPlan.late_drop_s)

    def fault(self, traffic: Any) -> None:
        live = f"{self.replica.http_url}/v2/health/live"
        self.watcher = Watcher({"stopped answering": lambda: http_status(live, 0.5) != 200}, interval_s=0.05,
                               on_first=lambda name: traffic.event(f"{self.replica.name} {name}"))
        self.note_fault(traffic, self.event)
        self.watcher.start()
        progress.step(f"{self.label}: kill action running")
        result = self._run("kill", self.replica.kill, KILL_TIMEOUT_S)
        traffic.event("kill returned")
        if not result.ok:
            self.outcome.incomplete = f"the kill action for replica {self.replica.name} failed: {result.problem()}"

    def release(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()

    def verdict(self) -> None:
        outcome = self.outcome
        outcome.kill_at_s = event_time(outcome.events, self.event)
        if outcome.kill_at_s is None:
            return
        if self.watcher is not None and "stopped answering" in self.watcher.first:
            outcome.stopped_answering_s = round(self.watcher.first["stopped answering"], 3)
        analyse(outcome.bins, outcome.kill_at_s, outcome)

    def exercised(self) -> str | None:
        if self.outcome.death_observed:
            return None
        return (f"no death was observed: replica {self.replica.name} kept answering {self.replica.http_url}"
                f"/v2/health/live and no request through the balancer failed for {self.settle_s:g} s after its kill "
                f"action (`{self.replica.kill}`): the kill did not take, so the balancer was not judged")

    def restore(self) -> str | None:
        if not self.fault_attempted or not self.replica.restore:
            return None
        result = self._run("restore", self.replica.restore, RESTORE_TIMEOUT_S)
        self.outcome.restored = result.ok
        return result.problem()

    def restore_advice(self) -> str:
        return (f"replica {self.replica.name} may be left dead: bring it back (`{self.replica.restore}`) and check "
                f"{self.replica.http_url}/v2/health/ready before trusting the checks after this one")

    def _run(self, step: str, command: str, timeout_s: float):
        result = run_command(command, f"replica {self.replica.name} {step} action", timeout_s=timeout_s)
        self.outcome.commands.append(result)
        return result


def judge_replica_death(check: CheckRecorder, outcome: DeathOutcome, success_min: Any) -> None:
    """PERF-4's rules on a replica death: the share lost after the kill within
    fleet_death_lost_fraction_max, the reroute within fleet_death_reroute_max_s, the success rate
    after the reroute at `success_min`."""
    replica = outcome.replica
    check.measure("requests after the kill", outcome.attempted_after, "requests", model=replica)
    check.measure("requests lost after the kill", outcome.lost_after, "requests", model=replica)
    check.measure("share lost after the kill", None if outcome.lost_fraction is None else round(outcome.lost_fraction, 5),
                  "ratio", model=replica, threshold=check.threshold("fleet_death_lost_fraction_max"),
                  finding=f"{outcome.lost_after} of {outcome.attempted_after} requests through the balancer failed "
                          f"after replica {replica} died")
    check.measure("time until the balancer stopped routing to the dead replica", outcome.reroute_s, "s",
                  model=replica, threshold=check.threshold("fleet_death_reroute_max_s"),
                  finding=f"the balancer kept routing failing requests to replica {replica} for "
                          f"{outcome.reroute_s} s after it died")
    check.measure("time from the kill until the replica stopped answering", outcome.stopped_answering_s, "s",
                  model=replica)
    if outcome.after_reroute_success_rate is not None:
        check.measure("success rate after the reroute", round(outcome.after_reroute_success_rate, 5), "ratio",
                      model=replica, threshold=success_min, comparison=">=")
    if check.errors:
        check.recommend("Make the balancer take a dead replica out fast and retry refused requests elsewhere "
                        "(nginx: max_fails=1 fail_timeout=..., proxy_next_upstream / grpc_next_upstream error; "
                        "Kubernetes: a readiness probe on /v2/health/ready with a short period).")
