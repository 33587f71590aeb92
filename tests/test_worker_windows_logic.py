"""Worker processes' windows and the server's counts over the same span (load/workers.py)."""

from __future__ import annotations

import threading

from pytest_triton_ready.load.server_side import ServerSnapshot
from pytest_triton_ready.load.stats import Tally
from pytest_triton_ready.load.traffic import TrafficPlan
from pytest_triton_ready.load.workers import EdgeSnapshots, WindowAssembler


class CountingServer:
    """A server's statistics whose inference_count is whatever the test has set it to."""

    def __init__(self) -> None:
        self.count = 0
        self.reads = 0

    def snapshot(self) -> ServerSnapshot:
        self.reads += 1
        stats = {"inference_count": self.count, "execution_count": self.count,
                 "inference_stats": {"success": {"count": self.count, "ns": 1000 * self.count}}}
        return ServerSnapshot(0.0, {"identity": stats})


def plan() -> TrafficPlan:
    return TrafficPlan({"identity": None}, "closed", concurrency={"identity": 4}, warmup_s=0.4, window_s=0.4,
                       bin_s=None, keep_tallies=5)


def part() -> dict:
    tally = Tally()
    tally.ok(0.002)
    return {"identity": tally.to_wire()}


def test_a_window_gets_the_servers_count_between_its_own_edges_not_when_its_parts_arrive():
    """Recorded from a CI failure: with two workers, window parts reach the parent after the
    window's closing edge, while the server has gone on counting (2,929.5 infer/s read against
    the engine's 2,687.5). The delta must be the one between the window's edges."""
    server = CountingServer()
    edges = EdgeSnapshots(server, first_edge=0.0, window_s=0.4, stop=threading.Event())
    assembler = WindowAssembler(2, plan(), edges)
    edges.take(0)
    server.count = 1000  # 1,000 requests during window 0
    edges.take(1)
    server.count = 1100  # the parent is late: 100 more before the parts arrive
    assert not assembler.add(0, 0, 0.0, 0.4, part())
    assert assembler.add(1, 0, 0.0, 0.4, part())
    window = assembler.windows[0]
    assert window.server.models["identity"].inference_count == 1000
    assert server.reads == 2  # no snapshot of its own at the parts' arrival


def test_a_window_whose_closing_edge_was_never_taken_has_no_server_numbers():
    """A run stopped before the edge: no server delta (never one over another span), and no wait."""
    server = CountingServer()
    stop = threading.Event()
    edges = EdgeSnapshots(server, first_edge=0.0, window_s=0.4, stop=stop)
    edges.take(0)
    stop.set()
    assert edges.window(0, wait_s=30.0) is None


def test_the_edge_thread_takes_edges_in_order_until_stopped():
    server = CountingServer()
    stop = threading.Event()

    class StopAfterThree(CountingServer):
        def snapshot(self) -> ServerSnapshot:
            server.count += 10
            snapshot = server.snapshot()
            if server.reads == 3:
                stop.set()
            return snapshot

    edges = EdgeSnapshots(StopAfterThree(), first_edge=0.0, window_s=0.01, stop=stop)
    edges.start()
    edges.join(5)
    assert not edges.is_alive()
    assert sorted(edges.snapshots) == [0, 1, 2]
    assert edges.window(1, wait_s=0.0).models["identity"].inference_count == 10
