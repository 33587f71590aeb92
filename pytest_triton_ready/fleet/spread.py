"""PERF-6: how the balancer spread the traffic, read from each replica's own counters.

The client sees only the balancer. Each replica counts what it served
(`nv_inference_request_success` on its metrics endpoint, and the statistics API's
`inference_stats.success.count` as a cross-check); the deltas over the same span give each
replica's share. The spread is judged as the largest relative deviation from the expected share
(the replica's weight / the sum of weights): |share - expected| / expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ReplicaCounters:
    """One replica's success counters at an instant: per model, from metrics and the stats API."""

    metrics: dict[str, float] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    error: str | None = None


def read_counters(replica: Any, client: Any, models: list[str], headers: dict[str, str],
                  timeout_s: float) -> ReplicaCounters:
    from ..server.metrics import MetricsError, scrape

    counters = ReplicaCounters()
    try:
        snapshot = scrape(replica.metrics_url, headers, timeout_s)
        for model in models:
            counters.metrics[model] = snapshot.total("nv_inference_request_success", model=model)
    except MetricsError as exc:
        counters.error = f"metrics: {exc}"
    try:
        for model in models:
            document = client.statistics(model)
            counters.stats[model] = sum(int(((s.get("inference_stats") or {}).get("success") or {}).get("count", 0))
                                        for s in document.get("model_stats", []))
    except Exception as exc:
        counters.error = (counters.error + "; " if counters.error else "") + f"stats API: {exc}".splitlines()[0]
    return counters


@dataclass
class Spread:
    """Each replica's served requests over one span, its share and its expected share."""

    served: dict[str, float]               # from metrics deltas (stats API where metrics failed)
    served_stats_api: dict[str, float]     # from the statistics API deltas
    expected: dict[str, float]
    unread: dict[str, str] = field(default_factory=dict)  # replica -> why its counters are missing

    @property
    def total(self) -> float:
        return sum(self.served.values())

    @property
    def shares(self) -> dict[str, float]:
        total = self.total
        return {r: (n / total if total else 0.0) for r, n in self.served.items()}

    def deviation(self, replica: str) -> float:
        expected = self.expected[replica]
        return abs(self.shares.get(replica, 0.0) - expected) / expected if expected else 0.0

    @property
    def max_deviation(self) -> float:
        return max((self.deviation(r) for r in self.expected), default=0.0)

    @property
    def idle(self) -> list[str]:
        """Replicas that served nothing while the fleet served traffic."""
        return [r for r in self.expected if self.total > 0 and self.served.get(r, 0) == 0]

    def to_dict(self) -> dict[str, Any]:
        return {"served": self.served, "served_stats_api": self.served_stats_api, "expected_shares": self.expected,
                "shares": self.shares, "max_deviation": self.max_deviation, "unread": self.unread}


def spread(before: dict[str, ReplicaCounters], after: dict[str, ReplicaCounters],
           expected: dict[str, float]) -> Spread:
    """Shares from counter deltas between two readings of every replica."""
    served: dict[str, float] = {}
    served_api: dict[str, float] = {}
    unread: dict[str, str] = {}
    for replica in expected:
        b, a = before.get(replica), after.get(replica)
        if b is None or a is None:
            unread[replica] = "not read"
            continue
        metric = sum(a.metrics.get(m, 0.0) - b.metrics.get(m, 0.0) for m in a.metrics) if a.metrics and b.metrics \
            else None
        api = sum(a.stats.get(m, 0) - b.stats.get(m, 0) for m in a.stats) if a.stats and b.stats else None
        if metric is None and api is None:
            unread[replica] = a.error or b.error or "no counter"
            continue
        served[replica] = float(metric if metric is not None else api)
        if api is not None:
            served_api[replica] = float(api)
    return Spread(served, served_api, expected, unread)


@dataclass
class FleetCapacity:
    """The fleet through the balancer against the sum of its replicas measured one by one."""

    per_replica: dict[str, float]   # infer/s, each replica alone, directly
    fleet: float                    # infer/s through the balancer, all replicas at once

    @property
    def sum(self) -> float:
        return sum(self.per_replica.values())

    @property
    def ratio(self) -> float | None:
        return self.fleet / self.sum if self.sum else None

    def to_dict(self) -> dict[str, Any]:
        return {"per_replica_infer_s": self.per_replica, "sum_infer_s": self.sum, "fleet_infer_s": self.fleet,
                "ratio": self.ratio}
