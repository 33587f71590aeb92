"""Streamed load on a server the run does not own (server layer): a tritonserver started outside
the run on tests/repositories/streaming, the streaming checklist attached to it with the default
attach settings. The stream sweep (PERF-2) is INCOMPLETE naming saturate, the plan lists every
streaming action, and the most streams in flight at once, read from the server's own batch
statistics, never exceed attach.max_concurrency (8).

`generate` schedules its streams in Triton's iterative sequence batcher: every execute() is one
decode step of every stream in flight, so the largest batch size the server executed is the most
streams it held at once (16 in flight would show as a batch of 16; max_batch_size is 16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_triton_ready.launchers.embedded import EmbeddedLauncher
from pytest_triton_ready.server.client import TritonClient

REPOSITORY = Path(__file__).resolve().parent / "repositories" / "streaming"
# Short streams (4 tokens) so that the target load holds the requests a TTFT p99 needs (477 at a look)
QUICK = ("--triton-threshold=streaming_duration_s=3", "--triton-threshold=streaming_soak_s=3",
         "--triton-threshold=streaming_curve_point_s=1", "--triton-threshold=streaming_final_deadline_s=3",
         "--triton-threshold=streaming_min_requests=3", "--triton-threshold=streaming_max_tokens=4")


def _batches(client: TritonClient, model: str) -> dict[int, int]:
    """Executions per batch size the server counted for `model` so far."""
    _, body = client.raw(f"/v2/models/{model}/stats")
    out: dict[int, int] = {}
    for version in json.loads(body).get("model_stats", []):
        for batch in version.get("batch_stats", []):
            out[int(batch["batch_size"])] = out.get(int(batch["batch_size"]), 0) + int(batch["compute_infer"]["count"])
    return out


@pytest.fixture
def streaming_server(request):
    launcher = EmbeddedLauncher(REPOSITORY)
    request.addfinalizer(launcher.cleanup)
    launcher.start()
    return launcher


def test_attached_streaming_run_stays_under_the_ceiling_and_names_saturate(run_checklist, streaming_server):
    endpoints = streaming_server.endpoints
    client = TritonClient(endpoints.http_url, endpoints.grpc_url, {}, 10.0, 16, {})
    before = _batches(client, "generate")
    run = run_checklist("test_streaming.py", url=None, allow=None, args=(
        f"--triton-url={endpoints.http_url}", f"--triton-grpc-url={endpoints.grpc_url}",
        f"--triton-metrics-url={endpoints.metrics_url}", "--triton-models=generate", *QUICK,
        "-k", "not sigterm and not dead_stub", "-p", "no:randomly"))
    output = run.outcome.stdout.str()
    plan = output[output.index("triton-ready run plan"):]
    assert "streams: sweep 1, 2, 4 ... 16 streams per decoupled model -> NOT RUN, INCOMPLETE (needs saturate)" in plan
    assert "streams: closed loop at 8 streams per decoupled model" in plan
    assert "streams: soak of 3 s at 8 streams per decoupled model" in plan
    verdicts = {r["nodeid"].split("::")[-1]: r for r in run.report["results"]}
    sweep = verdicts["test_streaming_tokens_and_ttft_curve"]
    assert sweep["verdict"] == "incomplete" and "--triton-allow=saturate" in sweep["reason"], sweep
    soak = verdicts["test_streaming_soak_every_request_finishes"]
    assert soak["verdict"] == "incomplete", soak  # run at the ceiling, as unary PERF-3; 3 s cannot judge a leak
    assert verdicts["test_streaming_slo_at_target_load"]["verdict"] in ("pass", "fail")
    grown = {size: n - before.get(size, 0) for size, n in _batches(client, "generate").items()
             if n > before.get(size, 0)}
    client.close()
    assert grown, "no stream reached the model during the run"
    assert max(grown) <= 8, f"batches of {max(grown)} streams ran, above attach.max_concurrency 8: {grown}"
    assert max(grown) >= 4, f"the target load never held several streams at once: {grown}"
