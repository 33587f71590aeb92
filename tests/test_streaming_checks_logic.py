"""The streaming checks' decisions that live in the package (load/streaming/run, performance/streaming_curve,
soak.streaming, streaming_agreement), on recorded numbers, recorded on a real CheckRecorder (no
server): INCOMPLETE or a warning for a measurement too small to judge, the curve's validity and
capacity, the stream soak's leak rule, and the server's count against the client's."""

from __future__ import annotations

import pytest
from test_streaming_confidence import _check, recorded_stream

from pytest_triton_ready.load.confidence import Estimate, Interval
from pytest_triton_ready.load.decision import UNDECIDED
from pytest_triton_ready.load.streaming.run import StreamingRun
from pytest_triton_ready.monitoring.streaming_agreement import no_histogram_caveat, record_counter, record_histograms
from pytest_triton_ready.performance.streaming_curve import SweptPoint, not_enough_valid, record_stream_capacity, record_stream_curve
from pytest_triton_ready.performance.streaming_rules import StreamingPoint
from pytest_triton_ready.record.model import Verdict
from pytest_triton_ready.server.metrics import MetricsSnapshot
from pytest_triton_ready.soak.streaming import StreamSoak, record_memory


def test_a_measurement_too_small_to_judge_is_incomplete_naming_every_reason():
    check = _check()
    with pytest.raises(pytest.skip.Exception, match="incomplete: m: 3 requests; n: too close to call"):
        StreamingRun(None, check).not_valid([None, "m: 3 requests", "n: too close to call"])
    assert check.result.verdict == Verdict.INCOMPLETE
    assert check.result.reason == "m: 3 requests; n: too close to call"


def test_with_a_failure_already_the_reason_is_a_warning_and_nothing_is_left_to_say_without_one():
    check = _check()
    check.finding("m: TTFT p99 over the SLO")
    StreamingRun(None, check).not_valid(["m: too close to call"])
    assert [f.severity for f in check.result.findings] == ["error", "warning"]
    quiet = _check()
    StreamingRun(None, quiet).not_valid([None, ""])
    assert not quiet.result.findings and quiet.result.reason in (None, "")


def _swept(concurrency: int, tokens_per_s: float, ttft_ms: float, problem: str | None = None) -> SweptPoint:
    stats = recorded_stream(users=max(1, concurrency), duration_s=2.0, seed=concurrency)
    ttft = Estimate("ttft p99", ttft_ms, Interval(0.9 * ttft_ms, ttft_ms, 0.95), 4)  # decided on its interval
    return SweptPoint(StreamingPoint(concurrency, tokens_per_s, ttft_ms, problem, ttft=ttft), stats, None)


def test_a_curve_with_too_few_valid_points_is_not_judged():
    swept = [_swept(1, 100, 50), _swept(2, 150, 60, "2 stuck requests"), _swept(4, 160, 70, "success rate 90%")]
    reason = not_enough_valid("m", swept, 0.999, 10)
    assert reason.startswith("m: curve not valid: only 1 of 3 curve points have >= 10 completed requests")
    assert not_enough_valid("m", swept[:1], 0.999, 10) is None


def test_the_capacity_is_the_best_point_within_the_ttft_slo_and_a_lower_bound_while_still_rising():
    swept = [_swept(1, 100, 50), _swept(2, 180, 60), _swept(4, 300, 70)]
    check = _check()
    verdict = record_stream_curve(check, "m", swept, 1000.0)
    capacity, undecided = record_stream_capacity(check, "m", swept, verdict, 1000.0, instances=1)
    assert undecided is None and capacity.concurrency == 4 and capacity.max_output_tokens_per_s_within_slo == 300
    assert capacity.lower_bound  # the sweep's last point, still rising by more than curve_min_gain
    assert capacity.max_requests_per_s_within_slo == pytest.approx(round(swept[-1].stats.requests_per_s, 3))
    assert any("capacity >= 300 output tokens/s" in f.message for f in check.result.findings)


def test_no_point_within_the_ttft_slo_fails_and_names_the_first_point():
    swept = [_swept(1, 100, 1500), _swept(2, 180, 1600)]
    check = _check()
    capacity, undecided = record_stream_capacity(check, "m", swept, record_stream_curve(check, "m", swept, 1000.0), 1000.0, 1)
    assert undecided is None and capacity.concurrency is None and capacity.max_output_tokens_per_s_within_slo == 0
    assert [f.message for f in check.errors] == ["m: no valid concurrency keeps TTFT p99 within 1000 ms "
                                                 "(at 1 stream it is 1500 ms)"]


def test_no_point_decided_within_the_slo_while_one_is_too_close_to_call_is_undecided():
    noisy = recorded_stream(users=2, duration_s=3.0, stall_every=7)
    point = StreamingPoint.measured(1, noisy, success_min=0.999, min_requests=10, level=0.95, window_s=1.0)
    swept = [SweptPoint(point, noisy, None)]
    check = _check()
    verdict = record_stream_curve(check, "m", swept, noisy.ttft_ms["p99"])
    _, undecided = record_stream_capacity(check, "m", swept, verdict, noisy.ttft_ms["p99"], 1)
    assert undecided.startswith(f"m: {UNDECIDED}: no concurrency decided within the TTFT SLO; at 1 streams TTFT p99 ")
    assert not check.errors


def _soak(memory, ran_s=None):
    return StreamSoak("m", "server process tree RSS", recorded_stream(), memory, ran_s=ran_s)


def test_memory_growth_is_judged_only_on_a_soak_long_enough_to_tell_a_leak_from_warm_up():
    growing = [(t, 1000.0 + 10 * t) for t in range(2, 62)]  # 600 MB over a minute
    long_soak = _check()
    leak_min = long_soak.threshold("soak_leak_min_duration_s").value
    assert record_memory(long_soak, _soak(growing, ran_s=leak_min), soak_s=leak_min) is None
    assert [f.message for f in long_soak.errors] and long_soak.result.measurements[-1].passed is False
    short = _check()
    reason = record_memory(short, _soak(growing), soak_s=4.0)
    assert "was not judged: a stream soak that ran 61 s, and telling" in reason and not short.errors
    assert [f.severity for f in short.result.findings] == ["warning"]
    unread = _check()
    assert "server memory could not be read" in record_memory(unread, _soak([(2, 1.0)]), soak_s=leak_min)


def test_a_stream_soak_cut_short_is_judged_on_the_span_it_ran_not_the_planned_one():
    growing = [(t, 1000.0 + 10 * t) for t in range(2, 62)]  # the load ended after a minute
    check = _check()
    leak_min = check.threshold("soak_leak_min_duration_s").value
    reason = record_memory(check, _soak(growing, ran_s=61.0), soak_s=leak_min)
    assert reason.startswith(f"m: the memory-leak rule (streaming_memory_growth_max_mb) was not judged: a stream "
                             f"soak that ran 61 s of the planned {leak_min:g} s")
    assert not check.errors and not check.result.judgements


def test_stream_soak_memory_within_the_limit_by_value_but_not_by_its_interval_is_too_close_to_call():
    """Main passed this on the fitted growth alone: -1 MB, under the 64 MB limit, with the RSS
    scattering by +-60 MB around its line (interval [-159, 157] MB)."""
    scatter = [60, -55, 40, -60, 50, -45, 58, -50]
    noisy = [(2 + 8 * i, 1000.0 + 0.5 * (2 + 8 * i) + scatter[i]) for i in range(8)]
    check = _check()
    leak_min = check.threshold("soak_leak_min_duration_s").value
    reason = record_memory(check, _soak(noisy, ran_s=leak_min), soak_s=leak_min)
    assert reason.startswith("m: memory growth too close to call: -1.2 MB over the ")
    assert "95% interval [-159.3, 157.0] MB, against streaming_memory_growth_max_mb = 64 MB: a stream soak of " \
        "about 5:17 (streaming_soak_s) would decide it" in reason  # its samples span 56 s
    assert check.result.measurements[-1].threshold is None and not check.errors
    flat = _check()
    assert record_memory(flat, _soak([(2 + i, 1000.0) for i in range(10)], ran_s=leak_min), soak_s=leak_min) is None
    assert flat.result.measurements[-1].passed is True


SCRAPE = """# TYPE nv_inference_request_success counter
nv_inference_request_success{{model="m",version="1"}} {count}
# TYPE nv_inference_first_response_histogram_ms histogram
nv_inference_first_response_histogram_ms_bucket{{model="m",version="1",le="10"}} {low}
nv_inference_first_response_histogram_ms_bucket{{model="m",version="1",le="100"}} {count}
nv_inference_first_response_histogram_ms_bucket{{model="m",version="1",le="+Inf"}} {count}
"""


def test_the_server_counts_every_streamed_request_and_its_first_response_median_agrees_with_the_ttft():
    before, after = MetricsSnapshot.parse(SCRAPE.format(count=0, low=0)), MetricsSnapshot.parse(SCRAPE.format(count=40, low=0))
    check = _check()
    record_counter(check, "m", 40.0, completed=40)
    assert check.result.measurements[-1].passed is True
    assert record_histograms(check, "m", before, after, client_p50=52.0) == 1
    gap = check.result.measurements[-1]
    assert gap.name == "TTFT gap, client - server" and gap.value == pytest.approx(3.0) and gap.passed
    assert record_histograms(check, "m", before, before, client_p50=52.0) == 0
    missed = _check()
    record_counter(missed, "m", 10.0, completed=40)
    assert "rose by 10 while the client completed 40" in missed.errors[0].message
    assert "2.52+" in no_histogram_caveat("2.51.0")
