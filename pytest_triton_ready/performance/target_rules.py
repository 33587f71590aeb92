"""PERF-1's rules at a `min_throughput` target (open loop, Poisson arrivals at the SLO's rate):
what the server achieved of what was offered, and whether its throughput meets the SLO.

- Backlog: requests still unanswered when the traffic stopped, beyond the number a server that
  keeps up holds in flight (Little's law: arrival rate x mean latency). A server that falls
  behind queues requests rather than failing them, and a ratio of completed requests alone never
  sees that queue.
- Achieved / offered: successful requests over every request offered in the same windows
  (successes, errors, drops) plus the backlog.
- Throughput against `min_throughput`: Poisson arrivals over D seconds at rate r put
  sqrt(r / D) of sampling noise on the measured rate, so the floor is r - 3 sqrt(r / D): a server
  below it does not deliver the SLO's rate, whatever the arrivals did.
"""

from __future__ import annotations

import math
from typing import Any

POISSON_SIGMAS = 3.0


def backlog(in_flight_at_stop: int | None, rate: float, mean_latency_ms: float | None) -> int:
    """Requests left in flight at the stop beyond what a server keeping up at `rate` holds."""
    if not in_flight_at_stop:
        return 0
    keeping_up = rate * (mean_latency_ms or 0.0) / 1000.0
    return max(0, in_flight_at_stop - math.ceil(keeping_up))


def achieved_ratio(stats: Any, backlog_requests: int) -> float:
    """Successful requests / (requests offered in the windows + the backlog)."""
    offered = stats.attempted + backlog_requests
    return stats.count_ok / offered if offered else 0.0


def min_throughput_floor(rate: float, duration_s: float) -> float:
    """The lowest measured throughput (infer/s) that still meets a `rate` SLO over `duration_s`
    of Poisson arrivals: the rate less POISSON_SIGMAS standard deviations of its sampling noise."""
    if duration_s <= 0:
        return rate
    return max(0.0, rate - POISSON_SIGMAS * math.sqrt(rate / duration_s))
