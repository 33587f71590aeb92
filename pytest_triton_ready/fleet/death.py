"""PERF-4, fleet: one replica dies under traffic through the balancer.

Open-loop traffic goes through the balancer; after `death_steady_s` the replica's declared kill
action runs (a command: `kubectl delete pod ... --grace-period=0`, `kill -KILL ...`); traffic goes
on for `death_observe_s`. From the 100 ms timeline:

- requests lost: failed (and dropped) requests from the kill to the end;
- reroute time: from the kill to the end of the last bin with a failed request, i.e. how long the
  balancer kept sending some traffic to the dead replica (0 when it never failed a request:
  the balancer retried refused connections on another replica);
- the survivors served the rest: the traffic after the reroute succeeds.

The restore action (if declared) runs afterwards, in a `finally`.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from .. import progress


@dataclass
class DeathOutcome:
    replica: str
    model: str
    kill_command: str
    kill_error: str | None = None
    restore_error: str | None = None
    restored: bool | None = None
    kill_at_s: float | None = None
    attempted_after: int = 0
    lost_after: int = 0
    errors_before: int = 0
    reroute_s: float | None = None
    errors: dict[str, int] = field(default_factory=dict)
    series: dict[str, list] = field(default_factory=dict)
    markers: list[dict[str, Any]] = field(default_factory=list)
    steady_success_rate: float | None = None
    after_reroute_success_rate: float | None = None

    @property
    def lost_fraction(self) -> float | None:
        return self.lost_after / self.attempted_after if self.attempted_after else None

    def to_dict(self) -> dict[str, Any]:
        keep = {k: v for k, v in self.__dict__.items() if k not in ("series", "markers")}
        return {**keep, "lost_fraction": self.lost_fraction}


def run_command(command: str, timeout_s: float = 60.0) -> str | None:
    """Run a declared action through the shell; None, or one line saying why it failed."""
    try:
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{command!r} could not run: {exc}"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"{command!r} exited with {done.returncode}: {tail[0]}"
    return None


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


def replica_death(load: Any, replica: Any, model: str, section: Any, protocol: str = "grpc") -> DeathOutcome:
    """Kill `replica` by its declared action under open-loop traffic through the balancer."""
    outcome = DeathOutcome(replica.name, model, replica.kill or "")
    traffic = load.open_loop(model, rate=section.death_rate_per_s, protocol=protocol)
    kill_at = None
    try:
        with traffic:
            progress.step(f"replica death ({replica.name}): baseline, {section.death_steady_s:g} s of traffic at "
                          f"{section.death_rate_per_s:g} requests/s")
            time.sleep(section.death_steady_s)
            traffic.event(f"kill {replica.name}")
            kill_at = traffic.elapsed_s()
            progress.step(f"replica death ({replica.name}): kill action running")
            outcome.kill_error = run_command(replica.kill)
            traffic.event("kill returned")
            progress.step(f"replica death ({replica.name}): killed; {section.death_observe_s:g} s of traffic "
                          "through the survivors")
            time.sleep(section.death_observe_s)
    finally:
        if replica.restore:
            progress.step(f"replica death ({replica.name}): restore action running")
            outcome.restore_error = run_command(replica.restore, timeout_s=180.0)
            outcome.restored = outcome.restore_error is None
    result = traffic.result
    outcome.kill_at_s = kill_at
    outcome.errors = dict(result.stats.errors)
    if kill_at is not None:
        analyse(result.timeline.bins, kill_at, outcome)
    outcome.series, outcome.markers = result.timeline.chart_series()
    return outcome
