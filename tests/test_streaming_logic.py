"""The streaming mode's arithmetic and decisions without a server: genai-perf's per-request
definitions, stuck requests, the request plan for LLM-style models, the curve, memory growth,
histogram quantiles and the readiness version gates."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from pytest_triton_ready.load.streaming import (
    EMPTY_FINAL,
    STREAMING_DEMO_REPOSITORY,
    VOCABULARY,
    RequestRecord,
    StreamingPlan,
    StreamTally,
    build_request,
    expected_tokens,
    is_final,
    response_tokens,
)
from pytest_triton_ready.load.streaming_rules import (
    CurvePoint,
    bucket_delta,
    fitted_growth,
    histogram_quantile,
    judge_curve,
    readiness_gates,
    streaming_slo,
)
from pytest_triton_ready.thresholds import THRESHOLDS, ThresholdValue


def test_ttft_itl_latency_follow_genai_perf():
    tally = StreamTally()
    # sent at 10.0; first token at 10.1; 5 tokens, last data at 10.5; final at 10.6
    tally.record(RequestRecord("r1", 0, start=10.0, sent=10.0, first=10.1, last_data=10.5, end=10.6, responses=6, tokens=5, final=True))
    # one token only: TTFT and latency, no ITL
    tally.record(RequestRecord("r2", 1, start=10.0, sent=10.0, first=10.2, last_data=10.2, end=10.3, responses=2, tokens=1, final=True))
    stats = tally.summary()
    assert stats.completed == 2 and stats.output_tokens == 6 and stats.responses == 8
    assert tally.itl.count == 1 and abs(tally.itl.mean_ms() - 100.0) < 0.2   # (10.5 - 10.1) / (5 - 1)
    assert abs(stats.ttft_ms["p50"] - 100.0) < 0.2 and abs(stats.latency_ms["p99"] - 600.0) < 1
    assert abs(stats.output_tokens_per_s - 6 / 0.6) < 1e-6                  # tokens / (last response - first send)
    assert abs(stats.tokens_per_s_per_user[0] - 5 / 0.6) < 1e-6


def test_stuck_and_failed_requests_are_not_successes():
    tally = StreamTally()
    tally.record(RequestRecord("ok", 0, 0.0, 0.0, 0.1, 0.2, 0.3, 3, 2, True))
    tally.record(RequestRecord("bad", 0, 0.0, 0.0, end=0.1, responses=1, error="model 7 failed on 12 tokens"))
    tally.record_stuck(RequestRecord("u3-r9", 3, 0.0, 0.5, 0.6, 0.9, None, 7, 7, False), now=10.5)
    stats = tally.summary()
    assert stats.completed == 1 and stats.errors == {"model N failed on N tokens": 1}
    assert stats.attempted == 3 and abs(stats.success_rate - 1 / 3) < 1e-9
    [stuck] = stats.stuck
    assert stuck.describe() == "request u3-r9 (user 3) got 7 tokens in 7 responses and no final response after 10.0 s"


def test_demo_token_function_is_the_models():
    source = (STREAMING_DEMO_REPOSITORY / "generate" / "1" / "model.py").read_text()
    assert "(zlib.crc32(prompt) + 7 * i + i * i) % len(VOCABULARY)" in source
    vocabulary = re.search(r"VOCABULARY = \((.*?)\)\n", source, re.S).group(1)
    assert tuple(w.strip().strip('"') for w in vocabulary.replace("\n", " ").split(",") if w.strip()) == VOCABULARY
    assert expected_tokens("hello world", 8) == ["cpu", "fast", "words", "every", "a", "cpu", "words", "words"]


def test_plan_finds_prompt_budget_and_token_output_of_llm_style_models():
    vllm = {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1]},
                       {"name": "stream", "datatype": "BOOL", "shape": [1]},
                       {"name": "sampling_parameters", "datatype": "BYTES", "shape": [1]}],
            "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [-1]}]}
    plan = StreamingPlan.from_metadata("vllm_model", vllm, {"max_batch_size": 0})
    assert (plan.prompt_input, plan.max_tokens_input, plan.token_output) == ("text_input", None, "text_output")
    arrays = plan.arrays("hi", 8, np.random.default_rng(0))
    assert arrays["stream"].tolist() == [True] and arrays["text_input"].tolist() == [b"hi"]
    trtllm = {"inputs": [{"name": "input_ids", "datatype": "INT32", "shape": [-1, -1]},
                         {"name": "request_output_len", "datatype": "INT32", "shape": [-1, 1]}],
              "outputs": [{"name": "output_ids", "datatype": "INT32", "shape": [-1, -1]}]}
    plan = StreamingPlan.from_metadata("tensorrt_llm", trtllm, {"max_batch_size": 8})
    assert (plan.max_tokens_input, plan.token_output) == ("request_output_len", "output_ids")
    assert plan.arrays("x", 16, np.random.default_rng(0))["request_output_len"].tolist() == [[16]]


def test_request_asks_for_empty_final_and_responses_are_read():
    from tritonclient.grpc import service_pb2

    plan = StreamingPlan.from_metadata("generate", {"inputs": [{"name": "PROMPT", "datatype": "BYTES", "shape": [1]},
                                                                {"name": "MAX_TOKENS", "datatype": "INT32", "shape": [1]}],
                                                     "outputs": [{"name": "TOKEN", "datatype": "BYTES", "shape": [1]}]}, {})
    request = build_request("generate", plan.arrays("p", 4, np.random.default_rng(0)), "u0-r1")
    assert request.id == "u0-r1" and request.parameters[EMPTY_FINAL].bool_param is True
    assert request.raw_input_contents[0] == b"\x01\x00\x00\x00p"    # BYTES: 4-byte length, then the bytes
    response = service_pb2.ModelInferResponse(id="u0-r1")
    response.outputs.add(name="TOKEN", datatype="BYTES", shape=[1, 3])
    assert response_tokens(response, "TOKEN") == 3 and response_tokens(response, "OTHER") == 0
    assert not is_final(response)
    response.parameters["triton_final_response"].bool_param = True
    assert is_final(response)


class _Settings:
    def __init__(self, yaml):
        self.yaml = yaml

    def section(self, name):
        return self.yaml.get(name) or {}

    def threshold(self, name):
        return ThresholdValue(name, THRESHOLDS[name].default, THRESHOLDS[name].unit, "default")


def test_streaming_slo_prefers_the_model_then_default_then_threshold():
    slo = streaming_slo(_Settings({"slo": {"default": {"itl_p99_ms": 50}, "llm": {"ttft_p99_ms": 100}}}), "llm")
    assert (slo["ttft_p99_ms"].value, slo["ttft_p99_ms"].source) == (100.0, "slo.llm")
    assert (slo["itl_p99_ms"].value, slo["itl_p99_ms"].source) == (50.0, "slo.default")
    assert slo["min_output_tokens_per_s"].source == "default"


def test_curve_knee_best_within_and_collapse():
    points = [CurvePoint(1, 150, 20), CurvePoint(2, 300, 22), CurvePoint(4, 200, 30), CurvePoint(8, 620, 40),
              CurvePoint(16, 640, 400)]
    verdict = judge_curve(points, ttft_budget_ms=100)
    assert verdict.knee == 8 and verdict.best_within.concurrency == 8
    assert verdict.drops == [(2, 4, 300, 200)]
    assert judge_curve([CurvePoint(1, 10, 500)], 100).best_within is None


def test_fitted_growth_and_histogram_quantile():
    assert fitted_growth([(0, 100), (10, 110), (20, 120), (30, 130)]) == pytest.approx(30)
    assert fitted_growth([(0, 1), (1, 2)]) == 0.0
    before = [(10.0, 0), (50.0, 0), (float("inf"), 0)]
    after = [(10.0, 20), (50.0, 100), (float("inf"), 100)]
    buckets = bucket_delta(before, after)
    assert histogram_quantile(buckets, 0.5) == pytest.approx(10 + 40 * (50 - 20) / 80)
    assert histogram_quantile([(10.0, 0), (float("inf"), 0)], 0.5) is None


def test_readiness_gates_by_version():
    assert readiness_gates("2.51.0") == {"model ready shows a dead stub": False, "server ready shows a dead stub": False}
    assert readiness_gates("2.64.0")["model ready shows a dead stub"] and not readiness_gates("2.64.0")["server ready shows a dead stub"]
    assert all(readiness_gates("2.68.1").values())


def test_streaming_test_repository_models_are_the_demo_model():
    repository = Path(__file__).resolve().parent / "repositories" / "streaming"
    demo = (STREAMING_DEMO_REPOSITORY / "generate" / "1" / "model.py").read_text()
    for model in ("generate", "missing_final", "slow_first"):
        assert (repository / model / "1" / "model.py").read_text() == demo
    assert 'missing_final_every", value: { string_value: "100"' in (repository / "missing_final" / "config.pbtxt").read_text()
    assert 'first_token_delay_ms", value: { string_value: "300"' in (repository / "slow_first" / "config.pbtxt").read_text()


VLLM_AND_TRTLLM = """# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model="llm",version="1",le="0.01"} %d
vllm:time_to_first_token_seconds_bucket{model="llm",version="1",le="0.1"} %d
vllm:time_to_first_token_seconds_bucket{model="llm",version="1",le="+Inf"} %d
vllm:time_to_first_token_seconds_sum{model="llm",version="1"} 1.0
vllm:time_to_first_token_seconds_count{model="llm",version="1"} %d
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model="llm",version="1"} %d
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 25
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 100
"""


def test_llm_families_are_catalogued_and_read_into_the_layers():
    from pytest_triton_ready.metrics import MetricsSnapshot
    from pytest_triton_ready.monitoring.catalogue import BUSINESS, INFRASTRUCTURE, VLLM, family_of
    from pytest_triton_ready.monitoring.layers import read_layers

    assert family_of("vllm:time_to_first_token_seconds_bucket").condition == VLLM
    assert family_of("nv_trt_llm_kv_cache_block_metrics").layer == INFRASTRUCTURE
    before = MetricsSnapshot.parse(VLLM_AND_TRTLLM % (0, 0, 0, 0, 1000))
    after = MetricsSnapshot.parse(VLLM_AND_TRTLLM % (0, 100, 100, 100, 3000))
    values = {(v.layer, v.name, v.model): v.value for v in read_layers(before, after, 2.0)}
    assert values[(BUSINESS, "time to first token (vLLM) P50", "llm")] == pytest.approx(55.0)  # 10 + 90 * 0.5 ms
    assert values[(BUSINESS, "output tokens/s (vLLM)", "llm")] == pytest.approx(1000.0)
    assert values[(INFRASTRUCTURE, "KV cache blocks used (TensorRT-LLM)", "tensorrt_llm")] == pytest.approx(0.25)


def test_unary_checks_leave_decoupled_models_to_the_streaming_checks():
    from types import SimpleNamespace

    from pytest_triton_ready.models import ready_decoupled_models, ready_models

    class Client:
        def repository_index(self):
            return [{"name": n, "version": "1", "state": "READY"} for n in ("llm", "scale", "down")][:2]

        def model_config(self, model):
            return {"model_transaction_policy": {"decoupled": True}} if model == "llm" else {}

    target = SimpleNamespace(client=Client(), models=lambda: ["scale", "llm", "down"])
    assert ready_models(target) == ["scale"] and ready_decoupled_models(target) == ["llm"]
