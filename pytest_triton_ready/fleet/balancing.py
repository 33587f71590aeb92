"""PERF-6: what the balancer does with the fleet. The spread: load through the balancer, each
replica's share from its own counters against its weight. The capacity: each replica alone, then
the whole fleet through the balancer, against the sum (spread.py holds the arithmetic)."""

from __future__ import annotations

import json
import time
from typing import Any

from .. import progress
from ..record.recorder import CheckRecorder
from .spread import FleetCapacity, Spread, spread
from .under_test import FleetUnderTest

METRICS_REFRESH_S = 1.1  # the metrics endpoint refreshes on Triton's metrics interval (1 s)


def measure_spread(fleet: FleetUnderTest, load: Any, model: str) -> tuple[Spread, int]:
    """(each replica's share of closed-loop load through the balancer, requests that succeeded
    through it), the shares from the replicas' counters read before and after."""
    before = fleet.counters([model])
    concurrency = fleet.balanced_concurrency
    progress.step(f"through the balancer: {model} at concurrency {concurrency} for {fleet.section.spread_s:g} s")
    result = load.run(load.closed_loop(model, concurrency, duration_s=fleet.section.spread_s, bin_s=None))
    time.sleep(METRICS_REFRESH_S)
    after = fleet.counters([model])
    return spread(before, after, fleet.fleet.expected_shares()), result.stats.count_ok


def record_spread(check: CheckRecorder, found: Spread, through_balancer: int, model: str) -> None:
    """Each replica's share within fleet_spread_max_deviation of its expected share; a replica
    whose counters could not be read or that served nothing is a finding."""
    check.measure("requests through the balancer", through_balancer, "requests", model=model)
    check.measure("requests counted by the replicas", round(found.total), "requests", model=model)
    threshold = check.threshold("fleet_spread_max_deviation")
    for name in found.expected:
        if name in found.unread:
            check.finding(f"replica {name}: its counters could not be read: {found.unread[name]}", model=name)
            continue
        check.measure("served requests", round(found.served[name]), "requests", model=name)
        check.measure("share of the traffic", round(found.shares[name], 4), "ratio", model=name)
        check.measure("deviation from the expected share", round(found.deviation(name), 4), "ratio",
                      model=name, threshold=threshold,
                      finding=f"replica {name} served {found.shares[name]:.1%} of the traffic; "
                              f"its expected share is {found.expected[name]:.1%}")
    for name in found.idle:
        check.finding(f"replica {name} served no request while the fleet served {found.total:.0f}", model=name)
    check.evidence("spread", json.dumps(found.to_dict(), indent=1))
    if check.errors:
        check.recommend("Check the balancer's method and weights (nginx: least_conn / weight=; a Kubernetes Service "
                        "balances connections, not gRPC requests: use a gRPC-aware proxy or client-side balancing).")


def measure_capacity(check: CheckRecorder, fleet: FleetUnderTest, load: Any, model: str) -> tuple[FleetCapacity, list[str]]:
    """(each replica's throughput alone at fleet.concurrency and the fleet's through the balancer
    at replicas x that, the measurements that were not trustworthy), each number recorded."""
    per_replica, problems = {}, []
    for number, replica in enumerate(fleet.replicas, start=1):
        progress.step(f"replica {replica.name} alone: {model} at concurrency {fleet.section.concurrency} "
                      f"(replica {number} of {len(fleet.replicas)})")
        measured = fleet.engine(replica).measure(model, concurrency=fleet.section.concurrency)
        per_replica[replica.name] = measured.stats.throughput_infer_s
        check.measure("capacity alone", round(measured.stats.throughput_infer_s, 1), "infer/s",
                      model=f"{replica.name}/{model}")
        check.measure("p99 alone", measured.stats.p99_ms, "ms", model=f"{replica.name}/{model}")
        if not measured.trustworthy:
            problems.append(f"{replica.name}: {measured.problem()}")
    progress.step(f"the fleet through the balancer: {model} at concurrency {fleet.balanced_concurrency}")
    through = load.measure(model, concurrency=fleet.balanced_concurrency)
    if not through.trustworthy:
        problems.append(f"through the balancer: {through.problem()}")
    check.measure("fleet capacity through the balancer", round(through.stats.throughput_infer_s, 1), "infer/s",
                  model=model)
    check.measure("p99 through the balancer", through.stats.p99_ms, "ms", model=model)
    return FleetCapacity(per_replica, through.stats.throughput_infer_s), problems


def record_capacity(check: CheckRecorder, capacity: FleetCapacity, problems: list[str], model: str) -> None:
    """The fleet's throughput at least fleet_capacity_ratio_min of the sum of its replicas'; with
    no failure, an untrustworthy measurement makes the check INCOMPLETE."""
    check.measure("sum of the replicas' capacities", round(capacity.sum, 1), "infer/s", model=model)
    check.evidence("capacity", json.dumps(capacity.to_dict(), indent=1))
    passed = check.measure("fleet / sum of replicas", None if capacity.ratio is None else round(capacity.ratio, 3),
                           "ratio", model=model, threshold=check.threshold("fleet_capacity_ratio_min"),
                           comparison=">=",
                           finding=f"the fleet served {capacity.fleet:.0f} infer/s through the balancer, "
                                   f"{capacity.ratio or 0:.0%} of the {capacity.sum:.0f} infer/s its replicas "
                                   "serve one by one")
    if not passed:
        check.recommend("Find what the fleet shares: the balancer's own CPU or connection limits (nginx "
                        "worker_processes, keepalive to the upstreams), a host that runs several replicas, or "
                        "a load generator that cannot drive the whole fleet (--triton-load-cluster).")
    if problems and not check.errors:
        check.incomplete("measurements not trustworthy: " + "; ".join(problems))
