"""Load workers on a Ray cluster (`--triton-load-cluster`, the `[distributed]` extra), for load one
runner machine cannot generate.

Each worker is a Ray async actor, placed one per alive node (strict node affinity) or, when nodes
declare the custom resource `triton_load`, one per unit of it. The runner:

1. measures each actor's clock offset (the sample with the shortest round trip of several
   `clock()` calls: offset = actor time - midpoint of the call) and reports them;
2. picks a start instant on its own clock and hands each actor that instant on the actor's clock,
   so every worker starts at the same moment and their windows line up;
3. gives each worker its share of the load (concurrency or rate divided), each open- or closed-loop
   in its own event loop and gRPC channel, exactly as the local worker processes do;
4. polls the actors for closed windows (Tallies: HdrHistogram-encoded latencies and counters),
   merges each window when every worker has sent it, applies the stop rule, takes the server-side
   snapshots itself as before, and stops every worker at once.

A cluster that cannot be reached, or an actor that dies, raises ClusterError: one line, which the
engine turns into an INCOMPLETE measurement; the remaining workers' numbers are never passed off
as the whole rate.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import TritonReadyError
from .traffic import Traffic, TrafficPlan, TrafficResult, Window
from .window_recorder import summarize
from .workers import ArrivalSnapshots, WindowAssembler, _merge_parts, _merge_sightings, split

RESOURCE = "triton_load"
START_DELAY_S = 2.0
POLL_S = 0.2
CLOCK_SAMPLES = 5
CONNECT_TIMEOUT_S = 5.0
INIT_TIMEOUT_S = 60.0


class ClusterError(TritonReadyError, RuntimeError):
    """The Ray cluster could not be used, or a worker on it died; one readable line."""


@dataclass
class ClusterInfo:
    """Where the workers ran: address, one entry per worker, and each worker's clock offset."""

    address: str
    workers: list[dict[str, Any]] = field(default_factory=list)  # node_id, node_ip, offset_s, rtt_s

    @property
    def max_abs_offset_s(self) -> float:
        return max((abs(w["offset_s"]) for w in self.workers), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"address": self.address, "workers": self.workers, "max_abs_clock_offset_s": self.max_abs_offset_s}


def _ray():
    try:
        import ray
    except ImportError:
        raise ClusterError("--triton-load-cluster needs Ray: pip install 'pytest-triton-ready[distributed]'") from None
    return ray


def connect(address: str) -> Any:
    """Connect this process to the cluster at `address` (once per process)."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    if address != "auto":  # ray.init retries an unreachable GCS for minutes: ask the port first
        host, _, port = address.removeprefix("ray://").rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            raise ClusterError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None
    failure: list[str] = []

    def init() -> None:
        try:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, logging_level="ERROR",
                     namespace="triton-ready", include_dashboard=False)
        except Exception as exc:  # ConnectionError, RuntimeError, grpc errors: one line either way
            failure.append(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)

    thread = threading.Thread(target=init, name="ray-connect", daemon=True)
    thread.start()
    thread.join(INIT_TIMEOUT_S)
    if thread.is_alive():
        raise ClusterError(f"cannot reach the Ray cluster at {address}: no answer within {INIT_TIMEOUT_S:g} s")
    if failure:
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {failure[0]}")
    return ray


def _actor_class(ray: Any) -> Any:
    @ray.remote(num_cpus=0, max_restarts=0, max_concurrency=16)
    class LoadWorker:
        """One load worker: runs its share of a TrafficPlan in its own event loop."""

        def __init__(self, index: int) -> None:
            self.index = index
            self.windows: list[tuple] = []
            self.traffic: Traffic | None = None
            self.stop_requested = False

        async def clock(self) -> float:
            return time.time()

        async def node(self) -> dict[str, str]:
            context = ray.get_runtime_context()
            return {"node_id": context.get_node_id(), "node_ip": ray.util.get_node_ip_address()}

        async def run(self, plan: TrafficPlan, transport: dict, start_at: float) -> tuple:
            from .senders import make_sender

            sender = make_sender(transport["protocol"], transport["grpc_url"], transport["http_url"],
                                 transport["headers"], transport["timeout_s"], transport["in_flight"])
            traffic = Traffic(plan, sender)
            traffic.on_tallies = lambda window, tallies: self.windows.append(
                (window.index, window.start_s, window.end_s, {m: t.to_wire() for m, t in tallies.items()}))
            traffic.counter_base = (traffic.counter_base + self.index * (1 << 20)) % (1 << 24)
            self.traffic = traffic
            delay = start_at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.stop_requested:
                traffic.stop()
            result = await traffic.run()
            return ({m: t.to_wire() for m, t in traffic.recorder.overall.items()}, result.in_flight_at_stop,
                    {m: {r: x.__dict__ for r, x in by.items()} for m, by in result.sightings.items()},
                    result.timed_out, result.completed, time.time())

        async def poll(self) -> list[tuple]:
            taken, self.windows = self.windows, []
            return taken

        async def stop(self) -> None:
            self.stop_requested = True
            if self.traffic is not None:
                self.traffic.stop()

    return LoadWorker


def _placements(ray: Any) -> list[dict[str, Any]]:
    """One placement per alive node, or per unit of the `triton_load` resource where declared."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if not nodes:
        raise ClusterError("the Ray cluster has no alive node")
    declared = [(n, int(n.get("Resources", {}).get(RESOURCE, 0))) for n in nodes]
    if any(units for _, units in declared):
        return [{"resources": {RESOURCE: 1}, "node_ip": n["NodeManagerAddress"]}
                for n, units in declared for _ in range(units)]
    return [{"scheduling_strategy": NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
             "node_ip": n["NodeManagerAddress"]} for n in nodes]


def _offset(ray: Any, actor: Any, samples: int = CLOCK_SAMPLES, timeout_s: float = 30.0) -> tuple[float, float]:
    """(offset, round trip) of the actor's clock against ours, from the shortest round trip."""
    best: tuple[float, float] | None = None
    for _ in range(samples):
        sent = time.time()
        remote = ray.get(actor.clock.remote(), timeout=timeout_s)
        back = time.time()
        rtt = back - sent
        if best is None or rtt < best[1]:
            best = (remote - (sent + back) / 2, rtt)
    return best


def _dead(exc: BaseException, what: str) -> ClusterError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ClusterError(f"{what}: {type(exc).__name__}: {text}")


def run_on_cluster(address: str, plan: TrafficPlan, transport: dict, probe: Any = None,
                   stop_when: Callable[[list[Window]], bool] | None = None, max_wait_s: float = 3600.0,
                   info: ClusterInfo | None = None) -> TrafficResult:
    """Run `plan` split across one Ray actor per node; windows merged here, `stop_when` decided here.
    `info` (if given) is filled with each worker's node and clock offset."""
    ray = connect(address)
    info = info if info is not None else ClusterInfo(address)
    LoadWorker = _actor_class(ray)
    placements = _placements(ray)
    if plan.mode == "closed":  # every worker needs at least one request in flight
        placements = placements[:max(1, min(plan.concurrency.values()))]
    count = len(placements)
    actors = []
    try:
        for i, placement in enumerate(placements):
            options = {k: v for k, v in placement.items() if k != "node_ip"}
            actors.append(LoadWorker.options(**options).remote(i))
        for i, actor in enumerate(actors):
            try:
                node = ray.get(actor.node.remote(), timeout=60)
                offset, rtt = _offset(ray, actor)
            except Exception as exc:
                raise _dead(exc, f"load worker {i} on the Ray cluster at {address} did not start") from None
            info.workers.append({**node, "offset_s": round(offset, 6), "rtt_s": round(rtt, 6)})
        return _drive(ray, actors, info, plan, transport, probe, stop_when, max_wait_s, count)
    finally:
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:
                pass


def _shares(plan: TrafficPlan, count: int) -> list[TrafficPlan]:
    shares = []
    for i in range(count):
        share = TrafficPlan(**{**plan.__dict__})
        share.bin_s = None
        if plan.mode == "closed":
            share.concurrency = {m: int(split(n, count, True)[i]) for m, n in plan.concurrency.items()}
        else:
            share.rates = {m: split(r, count, False)[i] for m, r in plan.rates.items()}
        shares.append(share)
    return shares


def _drive(ray: Any, actors: list, info: ClusterInfo, plan: TrafficPlan, transport: dict, probe: Any,
           stop_when: Callable[[list[Window]], bool] | None, max_wait_s: float, count: int) -> TrafficResult:
    shares = _shares(plan, count)
    if plan.mode == "closed" and any(not sum(s.concurrency.values()) for s in shares):
        raise ClusterError(f"concurrency {sum(plan.concurrency.values())} cannot be shared by {count} load workers "
                           "(each needs at least one request in flight)")
    start_at = time.time() + START_DELAY_S
    runs = [actor.run.remote(shares[i], {**transport, "in_flight": max(
        1, sum(shares[i].concurrency.values()) or plan.max_in_flight)}, start_at + info.workers[i]["offset_s"])
        for i, actor in enumerate(actors)]
    started_mono = time.monotonic() + (start_at - time.time())
    arrivals = ArrivalSnapshots(probe) if probe is not None else None
    assembler = WindowAssembler(count, plan, arrivals)
    stop_at = start_at + plan.warmup_s + plan.duration_s if plan.duration_s is not None else None
    deadline = time.time() + max_wait_s + START_DELAY_S
    stopping = False
    finals: dict[int, tuple] = {}

    def stop_all() -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            for actor in actors:
                actor.stop.remote()

    try:
        while len(finals) < count:
            now = time.time()
            if arrivals is not None and arrivals.last is None and now >= start_at + plan.warmup_s:
                arrivals.mark()
            if (stop_at is not None and now >= stop_at) or now >= deadline:
                stop_all()
            try:
                polled = ray.get([a.poll.remote() for a in actors], timeout=30)
            except Exception as exc:
                raise _dead(exc, "a load worker on the Ray cluster died or stopped answering") from None
            closed = False
            for worker, items in enumerate(polled):
                for index, begin, end, wire in sorted(items, key=lambda item: item[0]):
                    closed = assembler.add(worker, index, begin, end, wire) or closed
            if closed and stop_when is not None and stop_when(assembler.windows):
                stop_all()
            ready, _ = ray.wait([r for i, r in enumerate(runs) if i not in finals], num_returns=1, timeout=0)
            for ref in ready:
                i = runs.index(ref)
                try:
                    finals[i] = ray.get(ref)
                except Exception as exc:
                    raise _dead(exc, f"load worker {i} on node {info.workers[i].get('node_ip')} died") from None
                stop_all()  # one worker ended: the others' share alone is not the plan's rate
            if len(finals) < count:
                time.sleep(POLL_S)
    finally:
        stop_all()
    ended = time.monotonic()
    overall = _merge_parts([f[0] for f in finals.values()])
    stats, by_model = summarize(overall, max(0.0, ended - started_mono - plan.warmup_s))
    return TrafficResult(stats, by_model, assembler.windows, None, assembler.recent, plan.mode, started_mono, ended,
                         sum(f[1] for f in finals.values()), _merge_sightings([f[2] for f in finals.values()]),
                         sum(f[3] for f in finals.values()), sum(f[4] for f in finals.values()))
