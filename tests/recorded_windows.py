"""Recorded load windows as the engine returns them, for unit tests of stopping decisions."""

from __future__ import annotations

from pytest_triton_ready.load.traffic import TrafficResult


def traffic_result(windows):
    """A closed-loop TrafficResult of model "m" made of `windows`, the last one's stats as the total."""
    last = windows[-1]
    return TrafficResult(last.stats, {"m": last.stats}, windows, None, [w.tallies for w in windows], "closed", 0.0,
                         last.end_s)
