"""Recorded load windows as the engine returns them, for unit tests of stopping decisions."""

from __future__ import annotations

import random

from pytest_triton_ready.load.stats import Tally
from pytest_triton_ready.load.traffic import TrafficResult, Window


def traffic_result(windows):
    """A closed-loop TrafficResult of model "m" made of `windows`, the last one's stats as the total."""
    last = windows[-1]
    return TrafficResult(last.stats, {"m": last.stats}, windows, None, [w.tallies for w in windows], "closed", 0.0,
                         last.end_s)


def recorded_windows(p99_ms: float, count: int, per_window: int = 600, spread: float = 0.0, errors: int = 0,
                     seed: int = 7, window_s: float = 2.0, error: str = "StatusCode.INTERNAL: model raised",
                     count_spread: bool = False) -> list[Window]:
    """Windows of model "m" as the engine records them: each window's latencies drawn around a
    distribution whose p99 is `p99_ms` (uniform over [0.2, 1.0] x its top), scaled per window by up to
    +-`spread` (a busy machine's window-to-window noise), with `errors` failed requests per window
    (each failing with `error`); `count_spread`: the answers per window move by up to +-`spread` too."""
    rng = random.Random(seed)
    top_s = p99_ms / 1000.0 / (0.2 + 0.8 * 0.99)
    windows = []
    for i in range(count):
        scale = 1.0 + rng.uniform(-spread, spread)
        tally = Tally(started=i * window_s, ended=(i + 1) * window_s)
        answers = int(per_window * rng.uniform(1 - spread, 1 + spread)) if count_spread else per_window
        for _ in range(answers):
            tally.ok(top_s * scale * rng.uniform(0.2, 1.0))
        for _ in range(errors):
            tally.error(error)
        stats = tally.summary(window_s)
        windows.append(Window(i, i * window_s, (i + 1) * window_s, stats, {"m": stats}, tallies={"m": tally}))
    return windows
