"""Streaming rules decided with confidence, on recorded per-request samples (no server): TTFT,
ITL and output tokens/s with intervals from the requests cut into time windows; too close to
call, a clear pass and a clear fail; the streaming curve's points judged against their noise."""

from __future__ import annotations

import math
import random

import pytest
from default_settings import default_settings

from pytest_triton_ready.load.confidence import order_statistic_interval, samples_per_batch
from pytest_triton_ready.load.decision import FAIL, PASS, UNDECIDED, Rule, judge
from pytest_triton_ready.load.judged import record_judgement
from pytest_triton_ready.load.stats import LatencyHistogram
from pytest_triton_ready.load.streaming.confidence import MIN_WINDOWS, measurement_windows, stream_slo_rules, streaming_estimate, ttft_rule
from pytest_triton_ready.load.streaming.stats import RequestRecord, StreamTally
from pytest_triton_ready.performance.streaming_rules import StreamingPoint, judge_stream_curve
from pytest_triton_ready.record.model import Result
from pytest_triton_ready.record.recorder import CheckRecorder
from pytest_triton_ready.thresholds import ThresholdValue


def recorded_stream(ttft_ms: float = 80.0, itl_ms: float = 5.0, users: int = 8, duration_s: float = 6.0,
                    tokens: int = 32, jitter: float = 0.3, seed: int = 3, stall_every: int = 0):
    """The StreamStats of a closed loop as the engine records it: `users` streams, each sending
    its next request when the last ended, for `duration_s`; TTFT and ITL drawn within +-`jitter`
    of `ttft_ms` and `itl_ms`; with `stall_every`, every so many requests' TTFT is doubled."""
    rng = random.Random(seed)
    tally = StreamTally()
    n = 0
    for user in range(users):
        now = 0.001 * user
        while now < duration_s:
            n += 1
            ttft = ttft_ms / 1000 * rng.uniform(1 - jitter, 1 + jitter) * (2 if stall_every and n % stall_every == 0 else 1)
            itl = itl_ms / 1000 * rng.uniform(1 - jitter, 1 + jitter)
            rec = RequestRecord(f"u{user}-r{n}", user, now, sent=now, first=now + ttft,
                                last_data=now + ttft + (tokens - 1) * itl, responses=tokens + 1, tokens=tokens,
                                final=True)
            rec.end = rec.last_data + 0.0005
            tally.record(rec)
            now = rec.end
    return tally.summary()


def _check() -> CheckRecorder:
    return CheckRecorder(Result("PERF-1", "performance", "t", "checks/test_streaming.py::t"), default_settings())


def _slo(ttft_ms: float, itl_ms: float = 200.0, tokens_per_s: float = 0.0) -> dict[str, ThresholdValue]:
    return {"ttft_p99_ms": ThresholdValue("ttft_p99_ms", ttft_ms, "ms", "slo.m"),
            "itl_p99_ms": ThresholdValue("itl_p99_ms", itl_ms, "ms", "slo.m"),
            "min_output_tokens_per_s": ThresholdValue("min_output_tokens_per_s", tokens_per_s, "tokens/s", "slo.m")}


def test_the_requests_are_cut_into_windows_by_their_end_and_nothing_is_lost():
    stats = recorded_stream()
    windows = measurement_windows(stats, window_s=2.0)
    assert len(windows) == 3  # a 6.2 s span in windows of about 2 s
    assert sum(w.tokens for w in windows) == pytest.approx(stats.output_tokens)  # spread, never lost
    assert sum(w.ttft.count for w in windows) == stats.completed
    assert len(measurement_windows(stats, window_s=10.0)) == MIN_WINDOWS  # never fewer than three
    estimate = streaming_estimate("output tokens/s", stats, 0.95, 2.0)
    assert estimate.value == pytest.approx(stats.output_tokens_per_s)
    assert estimate.interval.contains(estimate.value)
    assert streaming_estimate("ttft p99", stats, 0.95, 2.0).value == stats.ttft_ms["p99"]


def test_a_streaming_threshold_inside_the_noise_is_too_close_to_call_with_its_interval():
    stats = recorded_stream(stall_every=7, duration_s=20.0)
    p99 = stats.ttft_ms["p99"]
    (ttft, _itl) = [judge(rule, streaming_estimate(rule.statistic, stats, 0.95, 2.0)) for rule in stream_slo_rules(_slo(p99))]
    assert ttft.outcome == UNDECIDED
    assert ttft.estimate.interval.low < p99 < ttft.estimate.interval.high
    check = _check()
    reason = record_judgement(check, ttft, model="m", threshold=_slo(p99)["ttft_p99_ms"])
    assert reason.startswith(f"m: too close to call: TTFT p99 {p99:.4g} ms, 95% interval [")
    assert reason.endswith(f"ms, rule <= {p99:.4g} ms")
    assert not check.errors and check.result.measurements[-1].threshold is None
    assert "margin" in check.result.evidence[-1].text and ": too close to call" in check.result.evidence[-1].text


def test_a_clear_streaming_pass_and_a_clear_fail_decide():
    stats = recorded_stream(stall_every=7, duration_s=20.0)  # 700 requests: enough for a bounded p99 interval
    passing = {r.name: judge(r, streaming_estimate(r.statistic, stats, 0.95, 2.0))
               for r in stream_slo_rules(_slo(1000.0, 200.0, tokens_per_s=100.0))}
    assert {name: j.outcome for name, j in passing.items()} == {"TTFT p99": PASS, "ITL p99": PASS,
                                                               "output tokens/s": PASS}
    assert passing["TTFT p99"].margin > 790
    failing = {r.name: judge(r, streaming_estimate(r.statistic, stats, 0.95, 2.0))
               for r in stream_slo_rules(_slo(40.0, 2.0, tokens_per_s=1e6))}
    assert {name: j.outcome for name, j in failing.items()} == {"TTFT p99": FAIL, "ITL p99": FAIL,
                                                               "output tokens/s": FAIL}
    check = _check()
    assert record_judgement(check, failing["TTFT p99"], model="m", threshold=_slo(40.0)["ttft_p99_ms"],
                            finding="m: TTFT p99 over the SLO") is None
    assert [f.message for f in check.errors] == ["m: TTFT p99 over the SLO"]


def test_a_tokens_per_s_minimum_inside_the_noise_is_too_close_to_call():
    stats = recorded_stream(jitter=0.6, seed=11)
    rule = Rule("output tokens/s", "output tokens/s", ">=", stats.output_tokens_per_s, "tokens/s")
    judged = judge(rule, streaming_estimate("output tokens/s", stats, 0.95, 2.0))
    assert judged.outcome == UNDECIDED and "tokens/s, rule >= " in judged.describe()


def test_a_measurement_without_enough_windows_of_requests_is_never_passed():
    stats = recorded_stream(users=1, duration_s=0.05)  # one request: one window holds it
    assert streaming_estimate("ttft p99", stats, 0.95, 2.0).interval is None
    assert judge(ttft_rule(1000.0), streaming_estimate("ttft p99", stats, 0.95, 2.0)).outcome == UNDECIDED


def _point(concurrency, stats):
    return StreamingPoint.measured(concurrency, stats, success_min=0.999, min_requests=10, level=0.95, window_s=1.0)


def test_a_streaming_curve_counts_a_point_within_the_ttft_slo_only_when_its_interval_is():
    noisy = recorded_stream(users=2, duration_s=60.0, stall_every=7)
    budget = noisy.ttft_ms["p99"]
    verdict = judge_stream_curve([_point(1, noisy)], budget)
    assert verdict.best_within is None  # the value meets the budget, its interval does not
    ((concurrency, judged),) = verdict.too_close
    assert concurrency == 1 and judged.outcome == UNDECIDED and "95% interval [" in judged.describe()
    assert judge_stream_curve([_point(1, noisy)], budget * 10).best_within.concurrency == 1


def test_a_streaming_curve_fall_inside_the_noise_is_not_a_collapse_but_a_clear_one_is():
    before = recorded_stream(users=2, duration_s=3.0, jitter=0.6, seed=5)
    slightly = recorded_stream(users=2, duration_s=3.0, jitter=0.6, seed=6, itl_ms=5.0 * 1.25)  # ~13% fewer tokens/s
    collapsed = recorded_stream(users=2, duration_s=3.0, jitter=0.1, seed=6, itl_ms=5.0 * 3)  # half the tokens/s
    top = recorded_stream(users=8, duration_s=3.0, jitter=0.1, seed=8, itl_ms=1.0)  # the knee, far above
    first, fell_a_little = _point(1, before), _point(2, slightly)
    assert fell_a_little.tokens_per_s < first.tokens_per_s * 0.9  # the values fell by more than 10%
    verdict = judge_stream_curve([first, fell_a_little, _point(4, top)], 1000.0)
    assert verdict.drops == []
    ((c_from, c_to, judged),) = verdict.unsure_drops
    assert (c_from, c_to, judged.outcome) == (1, 2, UNDECIDED)
    quiet = _point(1, recorded_stream(users=2, duration_s=3.0, jitter=0.1, seed=5))
    verdict = judge_stream_curve([quiet, _point(2, collapsed), _point(4, top)], 1000.0)
    assert [(a, b) for a, b, _, _ in verdict.drops] == [(1, 2)] and not verdict.unsure_drops


def test_a_percentile_of_too_few_requests_is_unbounded_above_and_can_fail_but_never_pass():
    """0.99 ^ n > 0.025 for n < 368: with fewer requests no order statistic bounds the p99 from
    above at 95%, as no clean request count shows a 0.99 success rate."""
    few = recorded_stream(users=2, duration_s=3.0)  # 60 requests
    ttft = streaming_estimate("ttft p99", few, 0.95, 1.0)
    assert ttft.interval.high == math.inf and ttft.interval.describe("ms").endswith(", unbounded] ms")
    assert ttft.interval.to_dict()["high"] is None
    assert judge(ttft_rule(1e6), ttft).outcome == UNDECIDED
    assert judge(ttft_rule(1.0), ttft).outcome == FAIL  # every request slower than 1 ms: a decided failure


def test_short_windows_are_batched_before_their_percentiles_widen_an_interval():
    """A window of five inter-token gaps has its "p99" at its largest gap, on average at the 83rd
    percentile: the log-scale batch means of such windows dragged the interval's low end far
    below a real stall's p99. Batches of >= 1 / (1 - q) samples keep it near the order statistic."""
    stalled = recorded_stream(users=8, duration_s=20.0, stall_every=25)  # 4% of the requests with a doubled TTFT
    windowed = streaming_estimate("ttft p99", stalled, 0.95, 0.1)  # 0.1 s windows: a handful of requests each
    ordered = order_statistic_interval(_merged_ttft(stalled), 99.0, 0.95)
    assert windowed.value > 1.5 * 80.0 and windowed.interval.low >= 0.9 * ordered.low
    assert samples_per_batch(99.0) == 100 and samples_per_batch(50.0) == 2 and samples_per_batch(100.0) is None


def _merged_ttft(stats):
    histogram = LatencyHistogram()
    for sample in stats.samples:
        if sample.ttft_s is not None:
            histogram.record_s(sample.ttft_s)
    return histogram


def test_an_unbounded_percentile_says_how_many_requests_would_bound_it():
    few = recorded_stream(users=8, duration_s=6.0)  # 208 requests
    judged = judge(ttft_rule(1e6), streaming_estimate("ttft p99", few, 0.95, 1.0))
    assert judged.outcome == UNDECIDED and judged.needed == 368
    assert judged.describe().endswith("rule <= 1000000 ms; TTFT p99 needs >= 368 requests at 95%, 208 measured")
    enough = recorded_stream(users=8, duration_s=20.0)
    assert judge(ttft_rule(1e6), streaming_estimate("ttft p99", enough, 0.95, 1.0)).outcome == PASS
