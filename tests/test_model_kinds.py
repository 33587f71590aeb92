"""One real server on tests/repositories/kinds (a model per kind of request, each with a broken
twin), the team's declarations in tests/data/model-kinds.yaml (perf_analyzer --input-data files,
expectations): every healthy twin passes CFG-1, PERF-1 and PERF-2 (the streaming ones for the
decoupled model), every broken twin fails CFG-1 naming the model, and perf_analyzer itself accepts
the same input-data files against the same models."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from pytest_triton_ready.launchers.embedded import EmbeddedLauncher

pytestmark = pytest.mark.server

KINDS = Path(__file__).resolve().parent / "repositories" / "kinds"
DECLARED = Path(__file__).resolve().parent / "data" / "model-kinds.yaml"
HEALTHY = ("values_ok", "dims_ok", "optional_ok", "bytes_ok", "tokens_ok", "seq_oldest_ok", "seq_direct_ok",
           "vllm_style_ok", "trtllm_style_ok")
BROKEN = tuple(model.replace("_ok", "_broken") for model in HEALTHY)
PERF_ANALYZER = REPO_ROOT / ".perf_analyzer" / "perf_analyzer"
CHECKS = ("answer_inference or final_flag or benchmark_meets or throughput_latency or slo_at_target "
          "or tokens_and_ttft")


@pytest.fixture(scope="module")
def kinds_server():
    """One embedded server serving every model of tests/repositories/kinds."""
    launcher = EmbeddedLauncher(KINDS)
    try:
        launcher.start()
        yield launcher.endpoints
    finally:
        launcher.cleanup()


def _run(run_checklist, endpoints, models, *files):
    return run_checklist(*files, url=endpoints.http_url, args=(
        f"--triton-grpc-url={endpoints.grpc_url}", f"--triton-metrics-url={endpoints.metrics_url}",
        "--triton-allow=saturate", f"--triton-config={DECLARED}", f"--triton-models={','.join(models)}", "-k", CHECKS))


def _verdicts(report):
    return {r["nodeid"].split("::")[-1]: r["verdict"] for r in report["results"]}


def test_every_healthy_kind_passes_cfg1_perf1_and_perf2(run_checklist, kinds_server):
    run = _run(run_checklist, kinds_server, HEALTHY, "test_config.py", "test_performance.py", "test_streaming.py")
    verdicts = _verdicts(run.report)
    assert verdicts == {
        "test_models_answer_inference": "pass", "test_benchmark_meets_slo_at_target_load": "pass",
        "test_throughput_latency_curve": "pass", "test_streaming_answers_end_with_final_flag": "pass",
        "test_streaming_slo_at_target_load": "pass", "test_streaming_tokens_and_ttft_curve": "pass",
    }, (verdicts, [r.get("findings") for r in run.report["results"] if r["verdict"] != "pass"])


def test_every_broken_twin_fails_cfg1_naming_it(run_checklist, kinds_server):
    run = _run(run_checklist, kinds_server, BROKEN, "test_config.py", "test_streaming.py")
    results = {r["nodeid"].split("::")[-1]: r for r in run.report["results"]}
    unary, streamed = results["test_models_answer_inference"], results["test_streaming_answers_end_with_final_flag"]
    assert unary["verdict"] == streamed["verdict"] == "fail"
    text = " ".join(f["message"] for f in unary["findings"] + streamed["findings"])
    for model in BROKEN:
        assert f"{model}:" in text, (model, text)
    assert "values_broken: inference failed: WAIT_MS must be within [0, 1] ms" in text
    assert "dims_broken: output Y has shape [1], declared [2]" in text
    assert "dims.json data[0] validation_data: output Y is [36]" in text
    assert "tokens_broken: request" in text and "no final response within 3 s" in text
    assert "bytes_broken: inference failed: tokenizer not initialized (inputs TEXT were synthesized" in text
    for model in ("seq_oldest_broken", "seq_direct_broken"):
        assert f"{model}: state mixed between sequences: step 2 answered TOTAL" in text
    assert "vllm_style_broken: the streamed request failed: KeyError: 'best_of'" in text
    assert "trtllm_style_broken: the streamed request failed: Streaming is only supported if model is deployed" in text


@pytest.mark.parametrize(("model", "data"), [("values_ok", "values.json"), ("dims_ok", "dims.json")])
def test_perf_analyzer_accepts_the_same_input_data_file(kinds_server, model, data):
    """The files the team keeps for perf_analyzer work there unchanged (validation_data included)."""
    if not PERF_ANALYZER.exists():
        pytest.skip(f"perf_analyzer is not installed at {PERF_ANALYZER} (../shared/tools/get-perf-analyzer.sh .perf_analyzer)")
    result = subprocess.run(
        [str(PERF_ANALYZER), "-m", model, "-u", kinds_server.grpc_url, "-i", "grpc", "--concurrency-range", "1",
         "--input-data", str(DECLARED.parent / "input-data" / data), "--measurement-interval", "1000",
         "--measurement-mode", "time_windows", "--stability-percentage", "999", "--max-trials", "3"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Throughput:" in result.stdout
