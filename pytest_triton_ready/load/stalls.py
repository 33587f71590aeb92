"""Stalls: a measurement window that completed far fewer requests than the windows around it.

A server that stops answering for a while (an instance holding requests for a dead stub, a GC
pause, a lock) shows up as one window with a fraction of its neighbours' completions, even when
the merged numbers look fine. Rule (threshold `load_stall_ratio`, 0.25): a window whose completed
requests (answers and errors) are below `ratio` x the median of its neighbours (up to `reach`
windows on each side) is a stall, where the run of such windows it belongs to withheld at least
`load_stall_min_s` (0.5 s) of its neighbours' traffic: a window's share is (median - completed) /
median x its length. A hiccup of a busy client host in one short window (a tenth of a second of
a 0.4 s window) is noise, not a server that stopped answering. Neighbourhoods with fewer than
`min_neighbour_requests` completions per window are not judged: too little traffic to tell a
stall from chance.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

MIN_NEIGHBOUR_REQUESTS = 10


@dataclass(frozen=True)
class Stall:
    index: int  # the window's index
    start_s: float
    end_s: float
    completed: int
    neighbours_median: float
    withheld_s: float = 0.0  # the neighbours' traffic the run of stalled windows it belongs to withheld

    @property
    def lost_s(self) -> float:
        """This window's share of the traffic it withheld, in seconds of its neighbours' rate."""
        return (self.neighbours_median - self.completed) / self.neighbours_median * (self.end_s - self.start_s)

    def describe(self) -> str:
        return (f"window {self.index} ({self.start_s:.1f}-{self.end_s:.1f} s) completed {self.completed} requests, "
                f"its neighbours a median of {self.neighbours_median:.0f} ({self.withheld_s:.1f} s of traffic "
                "withheld)")


def completed(window: Any) -> int:
    """Answers and errors completed in a window (a load Window, or anything with .stats)."""
    stats = window.stats
    return int(stats.count_ok + stats.count_errors)


def find_stalls(windows: Sequence[Any], ratio: float, min_s: float = 0.0, reach: int = 2,
                min_neighbour_requests: int = MIN_NEIGHBOUR_REQUESTS) -> list[Stall]:
    """The windows (with .index, .start_s, .end_s, .stats) that completed fewer than `ratio` x the
    median of their neighbours' completions, in runs of consecutive such windows that withheld at
    least `min_s` seconds of the neighbours' traffic."""
    flagged = _below_neighbours(windows, ratio, reach, min_neighbour_requests)
    runs: list[list[Stall]] = []
    for stall in flagged:
        if runs and runs[-1][-1].index == stall.index - 1:
            runs[-1].append(stall)
        else:
            runs.append([stall])
    stalls = []
    for run in runs:
        withheld = sum(s.lost_s for s in run)
        if withheld >= min_s:
            stalls += [replace(s, withheld_s=withheld) for s in run]
    return stalls


def _below_neighbours(windows: Sequence[Any], ratio: float, reach: int, min_neighbour_requests: int) -> list[Stall]:
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
