"""Stalls: a measurement window that completed far fewer requests than the windows around it.

A server that stops answering for a while (an instance holding requests for a dead stub, a GC
pause, a lock) shows up as one window with a fraction of its neighbours' completions, even when
the merged numbers look fine. Rule (threshold `load_stall_ratio`, 0.25): a window whose completed
requests (answers and errors) are below `ratio` x the median of its neighbours (up to `reach`
windows on each side) is a stall. Neighbourhoods with fewer than `min_neighbour_requests`
completions per window are not judged: too little traffic to tell a stall from chance.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MIN_NEIGHBOUR_REQUESTS = 10


@dataclass(frozen=True)
class Stall:
    index: int  # the window's index
    start_s: float
    end_s: float
    completed: int
    neighbours_median: float

    def describe(self) -> str:
        return (f"window {self.index} ({self.start_s:.1f}-{self.end_s:.1f} s) completed {self.completed} requests, "
                f"its neighbours a median of {self.neighbours_median:.0f}")


def completed(window: Any) -> int:
    """Answers and errors completed in a window (a load Window, or anything with .stats)."""
    stats = window.stats
    return int(stats.count_ok + stats.count_errors)


def find_stalls(windows: Sequence[Any], ratio: float, reach: int = 2,
                min_neighbour_requests: int = MIN_NEIGHBOUR_REQUESTS) -> list[Stall]:
    """The windows (with .index, .start_s, .end_s, .stats) that completed fewer than `ratio` x the
    median of their neighbours' completions."""
    counts = [completed(w) for w in windows]
    stalls = []
    for i, window in enumerate(windows):
        neighbours = counts[max(0, i - reach):i] + counts[i + 1:i + 1 + reach]
        if len(neighbours) < 2:
            continue
        median = statistics.median(neighbours)
        if median < min_neighbour_requests:
            continue
        if counts[i] < ratio * median:
            stalls.append(Stall(window.index, window.start_s, window.end_s, counts[i], median))
    return stalls
