"""The streaming mode's arithmetic and decisions without a server: genai-perf's per-request
definitions, stuck requests, the request plan for LLM-style models, the curve, memory growth,
histogram quantiles and the readiness version gates."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_triton_ready.demo.answers import VOCABULARY, expected_tokens
from pytest_triton_ready.load.confidence import Estimate, Interval
from pytest_triton_ready.load.decision import PASS
from pytest_triton_ready.load.streaming.requests import EMPTY_FINAL, StreamingPlan, build_request, is_final, response_tokens
from pytest_triton_ready.load.streaming.stats import RequestRecord, StreamTally
from pytest_triton_ready.load.streaming.traffic import STREAMING_DEMO_REPOSITORY
from pytest_triton_ready.performance.streaming_rules import StreamingPoint, judge_stream_curve, streaming_slo
from pytest_triton_ready.server.histograms import bucket_delta, histogram_quantile
from pytest_triton_ready.server.releases import readiness_gates
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


def _measured(concurrency, tokens_per_s, ttft_ms):
    """A point whose TTFT p99 interval reaches from 90% of its value up to the value."""
    return StreamingPoint(concurrency, tokens_per_s, ttft_ms,
                      ttft=Estimate("ttft p99", ttft_ms, Interval(0.9 * ttft_ms, ttft_ms, 0.95), 4))


def test_curve_knee_best_within_and_collapse():
    points = [_measured(1, 150, 20), _measured(2, 300, 22), _measured(4, 200, 30), _measured(8, 620, 40),
              _measured(16, 640, 400)]
    verdict = judge_stream_curve(points, ttft_budget_ms=100)
    assert verdict.knee == 8 and verdict.best_within.concurrency == 8
    assert verdict.best_ttft.outcome == PASS and verdict.best_ttft.value == 40
    assert verdict.drops == [(2, 4, 300, 200)]
    assert judge_stream_curve([_measured(1, 10, 500)], 100).best_within is None


def test_histogram_quantile():
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
    from pytest_triton_ready.monitoring.catalogue import BUSINESS, INFRASTRUCTURE, VLLM, family_of
    from pytest_triton_ready.monitoring.layers import read_layers
    from pytest_triton_ready.server.metrics import MetricsSnapshot

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

    from pytest_triton_ready.server.models import ready_decoupled_models, ready_models

    class Client:
        def repository_index(self):
            return [{"name": n, "version": "1", "state": "READY"} for n in ("llm", "scale", "down")][:2]

        def model_config(self, model):
            return {"model_transaction_policy": {"decoupled": True}} if model == "llm" else {}

    target = SimpleNamespace(client=Client(), models=lambda: ["scale", "llm", "down"])
    assert ready_models(target) == ["scale"] and ready_decoupled_models(target) == ["llm"]


class _Check:
    """Just enough of the `check` fixture: NOT APPLICABLE ends the check (as pytest.skip does)."""

    class Ended(Exception):
        pass

    def __init__(self, name="checks/test_soak.py::test_soak_stability"):
        from types import SimpleNamespace

        self.reason = None
        self.result = SimpleNamespace(nodeid=name)

    def not_applicable(self, reason):
        self.reason = reason
        raise self.Ended(reason)


def _target(states: dict[str, bool], ready: set[str] | None = None):
    """A target whose models are `states` (name -> decoupled), READY unless left out of `ready`."""
    from types import SimpleNamespace

    ready = set(states) if ready is None else ready

    class Client:
        def repository_index(self):
            return [{"name": n, "version": "1", "state": "READY" if n in ready else "UNAVAILABLE"} for n in states]

        def model_config(self, model):
            return {"model_transaction_policy": {"decoupled": True}} if states[model] else {"max_batch_size": 8}

    return SimpleNamespace(client=Client(), models=lambda: list(states))


def test_a_unary_check_defers_to_its_streaming_counterpart_only_when_every_ready_model_streams():
    from pytest_triton_ready.counterparts import streaming_counterpart
    from pytest_triton_ready.server.models import covered_by_streaming, defer_to_streaming, streaming_only

    assert streaming_only([], ["llm"]) and not streaming_only(["scale"], ["llm"]) and not streaming_only([], [])
    perf1 = streaming_counterpart("checks/test_performance.py::test_benchmark_meets_slo_at_target_load")
    reason = covered_by_streaming([], ["llm", "chat"], perf1)
    assert reason == ("every READY model in scope is decoupled (llm, chat): test_streaming_slo_at_target_load (PERF-1) "
                      "(checks/test_streaming.py) measures TTFT, ITL and output tokens/s at the target load against "
                      "the streaming SLO")
    assert covered_by_streaming(["scale"], ["llm"], perf1) is None  # a unary model to run the check on
    assert covered_by_streaming([], [], perf1) is None  # nothing READY: the check's own INCOMPLETE stands

    check = _Check()
    with pytest.raises(_Check.Ended):
        defer_to_streaming(check, _target({"llm": True, "broken": False}, ready={"llm"}))
    assert check.reason.startswith("every READY model in scope is decoupled (llm): "
                                   "test_streaming_soak_every_request_finishes (PERF-3)")
    check = _Check()
    defer_to_streaming(check, _target({"llm": True, "scale": False}))  # returns: mixed
    defer_to_streaming(check, _target({"llm": True}), unary=["scale"])  # the check's list
    defer_to_streaming(check, _target({"scale": False}, ready=set()))  # nothing READY
    assert check.reason is None


SHUTDOWN_UNSEEN = """I1201 01:09:03.540148 20185 http_server.cc:4713] "Started HTTPService at 127.0.0.1:33867"
Signal (15) received.
I1201 01:09:07.423177 20185 server.cc:305] "Waiting for in-flight requests to complete."
I1201 01:09:07.423206 20185 server.cc:321] "Timeout 30: Found 0 model versions that have in-flight inferences"
I1201 01:09:07.423287 20185 server.cc:336] "All models are stopped, unloading models"
I1201 01:09:07.423291 20185 server.cc:345] "Timeout 30: Found 1 live models and 0 in-flight non-inference requests"
E1201 01:09:07.671875266   20261 proto_buffer_writer.h:65]             ASSERTION FAILED: !byte_buffer->Valid()
Signal (6) received.
"""
SHUTDOWN_DRAINED = """Signal (15) received.
I1201 01:12:11.627065 26918 server.cc:305] "Waiting for in-flight requests to complete."
I1201 01:12:11.627090 26918 server.cc:321] "Timeout 30: Found 2 model versions that have in-flight inferences"
I1201 01:12:11.627093 26918 server.cc:325] "Model 'other' (version 1) has 4 in-flight inferences"
I1201 01:12:11.627093 26918 server.cc:325] "Model 'generate' (version 1) has 3 in-flight inferences"
I1201 01:12:12.627220 26918 server.cc:321] "Timeout 29: Found 0 model versions that have in-flight inferences"
I1201 01:12:12.627386 26918 server.cc:336] "All models are stopped, unloading models"
I1201 01:12:12.627391 26918 server.cc:345] "Timeout 29: Found 1 live models and 0 in-flight non-inference requests"
I1201 01:12:13.627506 26918 server.cc:345] "Timeout 28: Found 1 live models and 0 in-flight non-inference requests"
I1201 01:12:14.254145 26918 model_lifecycle.cc:624] "successfully unloaded 'generate' version 1"
I1201 01:12:14.627506 26918 server.cc:345] "Timeout 27: Found 0 live models and 0 in-flight non-inference requests"
"""


def test_the_shutdown_log_says_whether_triton_counted_the_streams_before_it_unloaded():
    from pytest_triton_ready.server.log import read_shutdown_log

    # Triton 2.51 with a model that releases its requests when execute() returns: nothing to drain, an abort
    unseen = read_shutdown_log("Signal (15) received.\nearlier run\n" + SHUTDOWN_UNSEEN, "generate")
    assert (unseen.signalled, unseen.counted, unseen.live_lines, unseen.exit_timeout) == (True, 0, 1, False)
    assert unseen.aborted.endswith("ASSERTION FAILED: !byte_buffer->Valid()")
    # the same server with the requests kept inside Triton (iterative sequence batching): drained first
    drained = read_shutdown_log(SHUTDOWN_DRAINED, "generate")
    assert (drained.counted, drained.aborted, drained.live_lines) == (3, None, 2)
    assert read_shutdown_log(SHUTDOWN_DRAINED, "absent").counted == 0
    assert read_shutdown_log("no signal here", "generate") == read_shutdown_log("", "generate")
    assert not read_shutdown_log("", "generate").signalled
    held = SHUTDOWN_DRAINED + 'E1201 01:12:44 main.cc:535] "failed to stop server: Internal - Exit timeout expired."\n'
    assert read_shutdown_log(held, "generate").exit_timeout


def test_the_demo_keeps_its_requests_inside_triton_until_the_final_response():
    """The SIGTERM root cause on Triton 2.51: a request the python backend released (execute()
    returned) is not drained. The shipped demo reschedules unfinished requests into an iterative
    sequence batcher instead, so the server counts every stream as in flight at SIGTERM."""
    from pytest_triton_ready.lint.modelconfig import read_model_directory

    config = read_model_directory(STREAMING_DEMO_REPOSITORY / "generate").config
    assert config.model_transaction_policy.decoupled and config.sequence_batching.iterative_sequence
    assert config.max_batch_size >= 8 and config.sequence_batching.HasField("oldest")
    model = (STREAMING_DEMO_REPOSITORY / "generate" / "1" / "model.py").read_text()
    assert "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE" in model and "request.correlation_id()" in model


def test_a_curve_whose_best_point_is_its_last_and_still_rising_is_a_lower_bound():
    from pytest_triton_ready.performance.streaming_rules import capacity_is_lower_bound

    rising = [StreamingPoint(1, 160, 20), StreamingPoint(2, 320, 21), StreamingPoint(4, 640, 22)]
    assert capacity_is_lower_bound(rising, rising[-1], 0.05)
    flat = [StreamingPoint(1, 160, 20), StreamingPoint(2, 320, 21), StreamingPoint(4, 330, 22)]
    assert not capacity_is_lower_bound(flat, flat[-1], 0.05)
    assert not capacity_is_lower_bound(rising, rising[1], 0.05) and not capacity_is_lower_bound(rising, None, 0.05)
    assert not capacity_is_lower_bound(rising[:1], rising[0], 0.05)


DEMO_METADATA = {"inputs": [{"name": "PROMPT", "datatype": "BYTES", "shape": [-1, 1]},
                            {"name": "MAX_TOKENS", "datatype": "INT32", "shape": [-1, 1]}],
                 "outputs": [{"name": "TOKEN", "datatype": "BYTES", "shape": [-1, 1]}]}


def test_fault_traffic_and_probes_of_a_streaming_model_count_streams_without_a_final_response_as_failed():
    from pytest_triton_ready.faults.stream_traffic import STUCK, StreamingTrafficResult, judge_probe
    from pytest_triton_ready.load.streaming.stats import StuckRequest
    from pytest_triton_ready.load.streaming.traffic import StreamingResult

    def record(rid, text=None, error=None, final=True):
        return RequestRecord(rid, 0, 1.0, sent=1.0, end=1.2, final=final and error is None, error=error,
                             text=list(text or []), tokens=len(text or []))

    records = [record("a", ["the", "model"]), record("b", ["a", "cpu"]),
               record("c", error="Stub process 'generate_0_0' is not healthy."), record("d", ["the"], final=False)]
    tally = StreamTally()
    for r in records[:3]:
        tally.record(r)
    tally.record_stuck(records[3], 12.0)
    result = StreamingResult(tally.summary(), None, records,
                             [StuckRequest("e", 1, 0, 0, 11.0)], [])
    probe = judge_probe("generate", result, ["the", "model"], 10.0)
    assert (probe.sent, probe.ok, probe.wrong_answers) == (5, 1, 1)
    assert probe.unhealthy_instances == ["generate_0_0"] and not probe.every_instance_answers
    assert probe.errors[STUCK.format(deadline=10.0)] == 2  # d (no final) and e (in flight at the stop)
    assert judge_probe("generate", StreamingResult(tally.summary(), None, records[:2], [], []), None, 10.0).every_instance_answers

    view = StreamingTrafficResult(result, None, 10.0).stats
    assert view.count_ok == 2 and view.count_errors == 3  # c failed; d stuck; e in flight at the stop
    assert view.errors[STUCK.format(deadline=10.0)] == 2


def test_the_streaming_engine_bins_ends_errors_and_drops_on_a_timeline():
    from pytest_triton_ready.load.streaming.traffic import StreamingLoad
    from pytest_triton_ready.load.timeline import Timeline

    plan = StreamingPlan.from_metadata("generate", DEMO_METADATA, {"max_batch_size": 16})
    load = StreamingLoad("127.0.0.1:1", plan, rate=10.0, timeline_bin_s=0.1)
    load._t0 = 100.0
    load.timeline = Timeline(100.0, 0.1)
    ok = RequestRecord("u0-r1", 0, start=100.0, sent=100.0, first=100.02, last_data=100.05, end=100.06, tokens=4,
                       responses=5, final=True)
    load._finish(ok)
    load._finish(RequestRecord("u1-r2", 1, start=100.0, sent=100.0, end=100.01, error="stream closed before the final response"))
    load.timeline.finish(100.0 + 0.35)
    bins, _ = load.timeline.snapshot()
    assert sum(b.ok for b in bins) == 1 and sum(b.errors for b in bins) == 1
    request = build_request("generate", plan.arrays("p", 2, np.random.default_rng(0)), "r1", version="2")
    assert request.model_version == "2" and list(request.inputs[0].shape) == [1, 1]


def test_malformed_streamed_requests_break_one_thing_each():
    from pytest_triton_ready.security.malformed import UNKNOWN_MODEL
    from pytest_triton_ready.security.malformed_streams import good_request, streaming_cases

    plan = StreamingPlan.from_metadata("generate", DEMO_METADATA, {"max_batch_size": 16})
    good = good_request(plan)
    cases = {c.name: c for c in streaming_cases(plan, {"max_batch_size": 16}, 3 * 2**20)}
    assert list(cases) == ["wrong datatype", "wrong shape", "missing input", "raw bytes cut short", "oversize payload",
                           "batch above max_batch_size", "unknown model"]
    assert cases["wrong datatype"].request.inputs[0].datatype == "FP32" and good.inputs[0].datatype == "BYTES"
    assert list(cases["wrong shape"].request.inputs[0].shape) == [1, 1, 1]
    assert [t.name for t in cases["missing input"].request.inputs] == ["MAX_TOKENS"]
    assert len(cases["missing input"].request.raw_input_contents) == 1
    assert len(cases["raw bytes cut short"].request.raw_input_contents[1]) == 2  # 2 of the INT32's 4 bytes
    assert len(cases["oversize payload"].request.raw_input_contents[0]) > 3 * 2**20
    assert list(cases["oversize payload"].request.inputs[0].shape) == [1, 1]  # a valid shape: the model must refuse
    batch = cases["batch above max_batch_size"].request
    assert [list(t.shape)[0] for t in batch.inputs] == [17, 17] and len(batch.raw_input_contents[1]) == 17 * 4
    assert cases["unknown model"].request.model_name == UNKNOWN_MODEL
    assert "batch above max_batch_size" not in {c.name for c in streaming_cases(plan, {"max_batch_size": 0}, 10)}


def test_the_rollout_watcher_asks_only_its_own_client_from_its_thread():
    """The rollout's watcher runs in a thread of its own; HTTP clients are not shared across threads
    (tritonclient.http on gevent breaks: "cannot switch to a different thread"). `answers_once`
    must therefore ask nothing of the run's client: the streaming plan comes in, decided before."""
    from types import SimpleNamespace

    from pytest_triton_ready.faults import FaultInjector, FaultPlan

    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"the run's client was used from the watcher thread: {name}")

    class Own:
        asked = []

        def infer(self, model, version=None):
            self.asked.append((model, version))
            return SimpleNamespace(ok=True)

    target = SimpleNamespace(client=Untouchable(), launcher=None, settings=SimpleNamespace(headers={}),
                             endpoints=SimpleNamespace(grpc_url="127.0.0.1:1"), owns_process=True)
    injector = FaultInjector(target, None, FaultPlan())
    own = Own()
    assert injector.answers_once("scale", own, "2") and own.asked == [("scale", "2")]
    plan = StreamingPlan.from_metadata("generate", DEMO_METADATA, {"max_batch_size": 16})
    assert not injector.answers_once("generate", Untouchable(), "2", "127.0.0.1:1", plan)  # nothing listens there


def _stream_stats(completed, tokens_per_s, ttft_p99, *, errors=0, stuck=0):
    from pytest_triton_ready.load.streaming.stats import StreamStats, StuckRequest

    return StreamStats(completed=completed, errors={"failed": errors} if errors else {},
                       stuck=[StuckRequest(f"r{n}", 0, 1, 1, 10.0) for n in range(stuck)], dropped=0, duration_s=3.0,
                       output_tokens=int(tokens_per_s * 3), responses=0, output_tokens_per_s=tokens_per_s,
                       responses_per_s=0.0, requests_per_s=completed / 3, tokens_per_s_per_user={},
                       ttft_ms={"p99": ttft_p99}, itl_ms={}, latency_ms={})


def test_streaming_capacity_comes_only_from_points_with_enough_successful_unstuck_requests():
    """Issue 23 d: the best point within the TTFT SLO is never one with failed, stuck or too few requests."""
    from pytest_triton_ready.performance.streaming_rules import enough_valid

    def point(concurrency, stats):
        return StreamingPoint.measured(concurrency, stats, success_min=0.999, min_requests=10)

    points = [point(1, _stream_stats(40, 150, 20)), point(2, _stream_stats(80, 300, 22)),
              point(4, _stream_stats(100, 900, 30, errors=25)),     # the fastest point fails a fifth of its requests
              point(8, _stream_stats(120, 800, 35, stuck=1)),       # one stream never got its final response
              point(16, _stream_stats(6, 950, 40))]                 # too few requests to stand for anything
    assert [p.trustworthy for p in points] == [True, True, False, False, False]
    assert "success rate 80.00% < 99.90%" in points[2].problem and "1 stuck requests" in points[3].problem
    assert "6 requests completed < minimum 10" in points[4].problem
    points = [replace(p, ttft=_measured(p.concurrency, p.tokens_per_s, p.ttft_p99_ms).ttft) for p in points]
    verdict = judge_stream_curve(points, ttft_budget_ms=100)
    assert verdict.best_within.concurrency == 2 and verdict.best_within.tokens_per_s == 300
    assert not enough_valid(points)  # 2 of 5 valid: no capacity is published
    assert enough_valid(points[:3]) and not enough_valid([points[0]] + points[2:4])
    assert judge_stream_curve(points[2:], ttft_budget_ms=100) == judge_stream_curve([], ttft_budget_ms=100)


def test_streaming_mon1_judges_the_request_counter_and_names_a_missing_series():
    """Issue 23 g: on a release without a first-response histogram, MON-1 still has a rule to judge
    (the success counter against the client's completed requests); a missing series is None, never 0."""
    from pytest_triton_ready.server.histograms import server_counted_requests
    from pytest_triton_ready.server.metrics import MetricsSnapshot

    def scrape(count):
        return MetricsSnapshot.parse("# TYPE nv_inference_request_success counter\n"
                                     f'nv_inference_request_success{{model="generate",version="1"}} {count}\n'
                                     'nv_inference_request_success{model="other",version="1"} 5\n')

    assert server_counted_requests(scrape(10), scrape(42), "generate") == 32
    assert server_counted_requests(scrape(10), scrape(42), "absent") is None
    assert server_counted_requests(MetricsSnapshot([]), MetricsSnapshot([]), "generate") is None


def test_no_demo_vocabulary_in_the_product_outside_demo():
    """Answers are checked from what the team declares, never from the demo's input names."""
    package = Path(__file__).resolve().parent.parent / "pytest_triton_ready"
    hits = [f"{path.relative_to(package)}:{n}" for path in package.rglob("*.py") if "demo" not in path.parts
            for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"PROMPT|MAX_TOKENS", line)]
    assert hits == []
