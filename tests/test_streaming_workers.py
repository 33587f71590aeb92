"""Streaming load in worker processes (load/streaming/workers.py): the tallies merge exactly (unit),
the users and the rate split without overlap, a look is decided on every worker's part, and
against a real tritonserver two worker processes drive the `generate` streams at once (server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_triton_ready.load.plan_runners import PlanNotRun
from pytest_triton_ready.load.streaming.requests import StreamingPlan
from pytest_triton_ready.load.streaming.stats import RequestRecord, StreamTally
from pytest_triton_ready.load.streaming.workers import LookParts, StreamWorkers, merged_tallies

REPOSITORY = Path(__file__).resolve().parent / "repositories" / "streaming"


def _record(rid: str, user: int, start: float, tokens: int = 4, error: str | None = None) -> RequestRecord:
    rec = RequestRecord(rid, user, start, sent=start, first=start + 0.02, last_data=start + 0.02 + 0.005 * (tokens - 1),
                        end=start + 0.03 + 0.005 * tokens, responses=tokens + 1, tokens=tokens, final=error is None,
                        error=error)
    return rec


def _tally(records: list[RequestRecord]) -> StreamTally:
    tally = StreamTally()
    for rec in records:
        tally.record(rec)
    return tally


def test_a_tally_sent_to_another_process_and_merged_equals_one_that_saw_every_request():
    first = [_record(f"u0-r{i}", 0, 100.0 + 0.1 * i, tokens=3 + i % 4) for i in range(40)]
    second = [_record(f"u1-r{i}", 1, 100.05 + 0.1 * i, tokens=2 + i % 3) for i in range(30)]
    second.append(_record("u1-r99", 1, 104.0, error="model 'generate' refused request 7"))
    together = _tally(first + second)
    together.record_stuck(_record("u1-r100", 1, 104.5, tokens=1), 108.0)
    part = _tally(second)
    part.record_stuck(_record("u1-r100", 1, 104.5, tokens=1), 108.0)
    merged = merged_tallies([StreamTally.from_wire(_tally(first).to_wire()), StreamTally.from_wire(part.to_wire())])
    assert merged.summary().to_dict() == together.summary().to_dict()
    assert sorted(merged.samples, key=lambda s: s.end) == sorted(together.samples, key=lambda s: s.end)
    assert merged.summary().tokens_per_s_per_user == together.summary().tokens_per_s_per_user


def test_an_empty_tally_travels_and_merges_to_nothing():
    merged = merged_tallies([StreamTally.from_wire(StreamTally().to_wire()) for _ in range(3)])
    stats = merged.summary()
    assert stats.completed == 0 and stats.attempted == 0 and stats.ttft_ms["p99"] is None and stats.started is None


def _plan() -> StreamingPlan:
    return StreamingPlan("generate", "PROMPT", "MAX_TOKENS", "TOKEN", [], True)


def test_the_streams_of_a_closed_loop_split_across_workers_with_their_own_user_numbers_and_seeds():
    shares = StreamWorkers(3, "localhost:1", _plan(), concurrency=8, duration_s=2.0, seed=7).shares()
    assert [(s["concurrency"], s["users"], s["first_user"], s["seed"]) for s in shares] == [
        (3, 3, 0, 7), (3, 3, 3, 8), (2, 2, 6, 9)]


def test_more_workers_than_streams_gives_each_stream_its_own_worker_at_most():
    assert len(StreamWorkers(4, "localhost:1", _plan(), concurrency=2, duration_s=1.0).shares()) == 2


def test_an_open_loop_splits_its_rate_and_its_streams():
    shares = StreamWorkers(2, "localhost:1", _plan(), rate=10.0, users=5, duration_s=1.0).shares()
    assert [(s["rate"], s["users"], s["first_user"]) for s in shares] == [(5.0, 3, 0), (5.0, 2, 3)]
    assert all("concurrency" not in s or s["concurrency"] is None for s in shares)


def test_closed_or_open_loop_must_be_said():
    with pytest.raises(ValueError, match="either concurrency"):
        StreamWorkers(2, "localhost:1", _plan(), duration_s=1.0)


def test_a_look_is_merged_only_once_every_worker_sent_its_part():
    parts = LookParts(2)
    a = _tally([_record("u0-r1", 0, 1.0)])
    b = _tally([_record("u1-r1", 1, 1.1), _record("u1-r2", 1, 1.2)])
    assert parts.add(0.5, a.to_wire()) is None
    assert parts.add(1.0, a.to_wire()) is None
    merged = parts.add(0.5, b.to_wire())
    assert merged is not None and merged.completed == 3
    assert parts.add(1.0, b.to_wire()).completed == 3


def test_a_worker_that_fails_raises_plan_not_run_naming_its_error():
    load = StreamWorkers(2, "localhost:1", _plan(), concurrency=2, duration_s=0.5, not_a_keyword=1)
    with pytest.raises(PlanNotRun, match="a streaming load worker failed: TypeError: .*not_a_keyword"):
        load.run()


@pytest.fixture
def generate_server(request):
    from pytest_triton_ready.launchers.embedded import EmbeddedLauncher

    launcher = EmbeddedLauncher(REPOSITORY)
    request.addfinalizer(launcher.cleanup)
    launcher.start()
    return launcher


def _largest_batch(http_url: str) -> int:
    """The largest batch `generate` executed: with its iterative sequence batcher, the most streams
    the server held at once."""
    from urllib.request import urlopen

    with urlopen(f"{http_url}/v2/models/generate/stats", timeout=10) as response:
        stats = json.loads(response.read())
    return max((int(b["batch_size"]) for v in stats["model_stats"] for b in v.get("batch_stats", [])), default=0)


@pytest.mark.server
def test_two_worker_processes_drive_the_streams_together_and_decide_on_both_tallies(generate_server):
    from pytest_triton_ready.server.client import TritonClient

    endpoints = generate_server.endpoints
    client = TritonClient(endpoints.http_url, endpoints.grpc_url, {}, 10.0, 4, {})
    plan = StreamingPlan.from_metadata("generate", client.model_metadata("generate"), client.model_config("generate"))
    client.close()
    seen = []

    def decided(stats):
        seen.append(stats)
        return len(seen) == 2  # decided at the second look

    result = StreamWorkers(2, endpoints.grpc_url, plan, concurrency=4, duration_s=8.0, warmup_s=0.3, max_tokens=4,
                           deadline_s=3.0, looks_s=(0.7, 1.4, 8.0), stop_when=decided).run()
    stats = result.stats
    assert result.workers == 2 and result.decided_at_s == 1.4, (result.workers, result.decided_at_s)
    assert stats is seen[-1]  # the stats it was decided on
    assert set(seen[0].tokens_per_s_per_user) == {0, 1, 2, 3}  # every look holds both workers' users
    assert stats.completed > 20 and stats.count_errors == 0 and not stats.stuck, stats.to_dict()
    assert stats.output_tokens == 4 * stats.completed
    assert stats.ttft_ms["p50"] is not None and stats.ttft_ms["p50"] >= 20  # the model's first-token delay
    assert 2 < _largest_batch(endpoints.http_url) <= 4  # both workers' streams were at the server at once


def test_a_streaming_check_splits_its_measurement_only_where_asked_or_where_the_cores_allow():
    from types import SimpleNamespace

    from pytest_triton_ready.load.streaming.run import StreamingRun
    from pytest_triton_ready.load.workers import auto_workers

    here = SimpleNamespace(endpoints=SimpleNamespace(grpc_url="127.0.0.1:8001"))
    run = StreamingRun(here, SimpleNamespace())
    assert run.workers_for(64, None) == auto_workers(64, None)  # "auto": one per 32 streams, half the cores
    remote = StreamingRun(SimpleNamespace(endpoints=SimpleNamespace(grpc_url="triton.example:8001")), SimpleNamespace())
    assert remote.workers_for(64, None) == auto_workers(64, None, server_here=False)
    run.workers = 3
    assert run.workers_for(2, None) == 3


def test_a_streaming_check_whose_worker_failed_ends_incomplete_with_the_workers_line():
    from types import SimpleNamespace

    from pytest_triton_ready.load.streaming.run import StreamingRun
    from tests.default_settings import default_settings
    from tests.test_streaming_guard_logic import _policy

    said = []

    def incomplete(reason):
        said.append(reason)
        pytest.skip(f"incomplete: {reason}")

    triton = SimpleNamespace(endpoints=SimpleNamespace(grpc_url="localhost:1"), settings=SimpleNamespace(headers={}),
                             client=SimpleNamespace(changes=0))
    check = SimpleNamespace(threshold=default_settings().threshold, incomplete=incomplete)
    run = StreamingRun(triton, check, _policy(), workers=2)
    with pytest.raises(pytest.skip.Exception):
        run.measure(_plan(), [], run.looks(0.5), concurrency=2, not_a_keyword=1)
    assert said and said[0].startswith("generate at 2 streams: a streaming load worker failed: TypeError"), said
