"""PERF-1's rules at a min_throughput target without a server (performance/target_rules.py): the backlog
left in flight counts as offered and not achieved, and the measured throughput is held against the
SLO's rate less the Poisson arrivals' sampling noise."""

from __future__ import annotations

from pytest_triton_ready.load.stats import Stats
from pytest_triton_ready.performance.target_rules import achieved_ratio, backlog, min_throughput_floor


def _stats(ok, *, errors=0, dropped=0, duration_s=6.0, mean_ms=20.0):
    return Stats(count_ok=ok, errors={"failed": errors} if errors else {}, dropped=dropped, duration_s=duration_s,
                 throughput_infer_s=ok / duration_s, percentiles_ms={"p50": mean_ms, "p99": mean_ms}, mean_ms=mean_ms)


def test_a_server_that_queues_instead_of_failing_misses_achieved_over_offered():
    """Issue 23 f: 100 infer/s offered for 6 s, 570 answered and none failed: every completed request
    succeeded (a success share of 1.0), but 150 were still waiting at the end, 100 more than a server
    keeping up holds in flight (100/s x 0.5 s); achieved / offered is 570 / 670."""
    behind = _stats(570, mean_ms=500.0)
    assert behind.success_rate == 1.0  # the ratio PERF-1 used to judge
    queued = backlog(150, 100.0, behind.mean_ms)
    assert queued == 100
    assert round(achieved_ratio(behind, queued), 3) == 0.851
    keeping_up = _stats(600, mean_ms=20.0)
    assert backlog(3, 100.0, keeping_up.mean_ms) == 1 and achieved_ratio(keeping_up, 1) > 0.99
    assert backlog(None, 100.0, None) == backlog(0, 100.0, 20.0) == 0
    assert achieved_ratio(_stats(0), 0) == 0.0


def test_min_throughput_is_judged_against_the_rate_less_poisson_noise():
    """Issue 23 f: the throughput is compared with min_throughput; Poisson arrivals at 100/s over 6 s
    vary by sqrt(100 / 6) = 4.1 infer/s, so the floor is 100 - 3 x 4.08 = 87.8 infer/s."""
    assert round(min_throughput_floor(100.0, 6.0), 1) == 87.8
    assert round(min_throughput_floor(1000.0, 6.0), 1) == 961.3
    assert min_throughput_floor(100.0, 0.0) == 100.0 and min_throughput_floor(1.0, 0.01) == 0.0
