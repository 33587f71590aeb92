"""Where a measured plan runs, behind one shape (`PlanRunner.run(plan, stop_when)` returns the
plan's TrafficResult), as locust's local and distributed runners do:

- `LocalRunner`: this process, on the shared event loop (load/background.py);
- `ProcessRunner`: worker processes on this host, the plan split across them (load/workers.py);
- `ClusterRunner`: one Ray actor per node of a cluster (load/ray_workers.py, the `[distributed]`
  extra, `--triton-load-cluster`).

Each says how many workers drove the load and, for a cluster, where they ran; a runner that could not
run the plan raises `PlanNotRun` with the one-line reason (the measurement is then not valid, so
INCOMPLETE in a check, never a number). `LoadEngine.runner_for` picks one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import TritonReadyError
from .workers import run_in_workers

if TYPE_CHECKING:
    from .engine import LoadEngine
    from .traffic import TrafficPlan, TrafficResult, Window

StopWhen = Callable[[list["Window"]], bool]


class PlanNotRun(TritonReadyError, RuntimeError):
    """The runner could not run the plan (a cluster that cannot be reached, a worker that died)."""


class PlanRunner(Protocol):
    """Runs a measured TrafficPlan until `stop_when(windows)` says so, or the plan ends."""

    @property
    def workers(self) -> int: ...

    @property
    def cluster(self) -> dict[str, Any] | None: ...

    def run(self, plan: TrafficPlan, stop_when: StopWhen) -> TrafficResult: ...


@dataclass
class LocalRunner:
    """The plan in this process, on the shared event loop."""

    engine: LoadEngine
    protocol: str
    server_stats: bool
    workers: int = 1
    cluster: None = None

    def run(self, plan: TrafficPlan, stop_when: StopWhen) -> TrafficResult:
        return self.engine.run(self.engine.background(plan, self.protocol, self.server_stats, None, stop_when=stop_when))


@dataclass
class ProcessRunner:
    """The plan split across `workers` processes on this host; windows merged, `stop_when` decided here."""

    workers: int
    transport: dict[str, Any]
    probe: Any = None
    cluster: None = None

    def run(self, plan: TrafficPlan, stop_when: StopWhen) -> TrafficResult:
        return run_in_workers(plan, self.workers, self.transport, self.probe, stop_when)


@dataclass
class ClusterRunner:
    """The plan split across one Ray actor per node of the cluster at `address`."""

    address: str
    transport: dict[str, Any]
    probe: Any = None
    info: Any = field(default=None)

    def __post_init__(self) -> None:
        from .ray_workers import ClusterInfo  # Ray only when a cluster is asked for

        self.info = self.info or ClusterInfo(self.address)

    @property
    def workers(self) -> int:
        return len(self.info.workers)

    @property
    def cluster(self) -> dict[str, Any]:
        return self.info.to_dict()

    def run(self, plan: TrafficPlan, stop_when: StopWhen) -> TrafficResult:
        from .ray_workers import ClusterError, run_on_cluster

        try:
            return run_on_cluster(self.address, plan, self.transport, self.probe, stop_when, info=self.info)
        except ClusterError as exc:
            raise PlanNotRun(f"load workers on Ray: {exc}") from exc


__all__ = ["ClusterRunner", "LocalRunner", "PlanNotRun", "PlanRunner", "ProcessRunner"]
