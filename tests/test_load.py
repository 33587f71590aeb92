"""The load engine against a real tritonserver: open loop vs closed loop on a deliberately slow
model, an unstable run reported unstable, percentiles against a brute-force sort, windows with
server-side deltas, HTTP and gRPC."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_triton_ready.launchers.embedded import EmbeddedLauncher
from pytest_triton_ready.load import LoadEngine, MeasureRules, Tally
from pytest_triton_ready.load.server_side import ServerProbe
from pytest_triton_ready.load.stats import RELATIVE_PRECISION
from pytest_triton_ready.server.client import TritonClient

TEST_REPOSITORIES = Path(__file__).resolve().parent / "repositories"

SLOW_SERVICE_S = 0.05  # tests/repositories/load/slow: 50 ms per request, one instance
FAST_RULES = MeasureRules(warmup_s=0.3, window_s=0.4, max_windows=6, min_duration_s=1.2, min_requests=50)


@pytest.fixture(scope="module")
def load_server():
    launcher = EmbeddedLauncher(TEST_REPOSITORIES / "load")
    launcher.start()
    yield launcher
    launcher.cleanup()


@pytest.fixture(scope="module")
def engine(load_server):
    endpoints = load_server.endpoints
    client = TritonClient(endpoints.http_url, endpoints.grpc_url)
    yield LoadEngine(client, endpoints.grpc_url, endpoints.http_url,
                     probe_factory=lambda models: ServerProbe(client.raw, models))
    client.close()


def test_open_loop_on_a_slow_model_queues_and_drops(engine):
    """40 requests/s against a 20 requests/s model: the queue at the server grows (latency, sent on
    time, climbs bin after bin) and, once 8 requests wait, further ones are dropped and counted."""
    with engine.open_loop("slow", rate=40, max_in_flight=8, bin_s=0.25) as traffic:
        time.sleep(2.0)
        traffic.event("two seconds")
    result = traffic.result
    stats = result.stats
    assert stats.dropped > 10, stats.to_dict()
    assert stats.attempted + result.in_flight_at_stop == pytest.approx(80, abs=2)
    assert stats.count_ok <= 2.0 / SLOW_SERVICE_S + 2
    assert stats.p99_ms > 4 * SLOW_SERVICE_S * 1000  # queued behind several others
    bins = [b for b in result.timeline.bins if b.ok]
    assert bins[-1].p50_ms > bins[0].p50_ms * 2, [b.to_dict() for b in result.timeline.bins]
    assert [e.name for e in result.timeline.events] == ["two seconds"]
    assert result.timeline.events[0].t_s == pytest.approx(2.0, abs=0.3)
    series, markers = result.timeline.chart_series()
    assert markers == [{"x": round(result.timeline.events[0].t_s, 3), "label": "two seconds"}]
    assert sum(v for _, v in series["dropped per bin"]) == stats.dropped


def test_closed_loop_on_a_slow_model_throttles_itself(engine):
    """Four requests in flight against the same model: nothing is dropped, throughput settles at
    the model's capacity and latency at four service times (the client waits its turn)."""
    result = engine.run(engine.closed_loop("slow", 4, duration_s=2.0, warmup_s=0.3))
    stats = result.stats
    assert stats.dropped == 0 and stats.count_errors == 0
    assert 0.6 / SLOW_SERVICE_S <= stats.throughput_infer_s <= 1.1 / SLOW_SERVICE_S
    assert 3 * SLOW_SERVICE_S * 1000 <= stats.p50_ms <= 6 * SLOW_SERVICE_S * 1000


def test_unstable_run_is_reported_unstable(engine):
    """A model that slows down with every request never gives three windows within 10%."""
    measurement = engine.measure("drifting", concurrency=2, rules=FAST_RULES)
    assert not measurement.stable
    assert not measurement.trustworthy
    assert "unstable" in measurement.problem()
    assert len(measurement.windows) == FAST_RULES.max_windows
    throughputs = [w.stats.throughput_infer_s for w in measurement.windows]
    assert throughputs[-1] < throughputs[0]


def test_stable_measurement_with_server_side_deltas(engine):
    """A closed loop on the identity model is stable and valid, and the server's statistics for
    the same windows count the same requests: within the requests in flight at the edges, plus
    those completed while the statistics were being read (tens of ms after each window edge on a
    busy machine, at thousands of requests per second: up to 2%)."""
    measurement = engine.measure("identity", concurrency=4, rules=FAST_RULES.__class__(
        warmup_s=0.5, window_s=0.5, max_windows=10, stability_tolerance=0.5, min_duration_s=1.5, min_requests=100))
    assert measurement.valid, measurement.validity_detail
    assert measurement.stable, measurement.stability_detail
    server = measurement.server_model
    assert server is not None
    reported = sum(w.stats.count_ok for w in measurement.windows[-3:])
    assert server.success == pytest.approx(reported, abs=4 * 3 + 8 + 0.02 * reported)
    # no batching (max_batch_size 0): one execution per inference, within the one request whose two
    # counters the statistics may catch half-updated at each window edge
    assert server.average_batch_size == pytest.approx(1.0, abs=2 / server.success)
    assert server.stage_us["compute_infer"] > 0


@pytest.mark.parametrize("workers", [1, 2])
def test_throughput_over_five_stability_windows_matches_the_servers_count(engine, workers):
    """With load_stability_windows=5 the reported throughput is the requests of the last 5 windows
    over the duration of those 5 windows: the same rate as the server's own inference_count delta
    over the same windows (within the requests in flight at the edges), not 3/5 of it."""
    rules = MeasureRules(warmup_s=0.4, window_s=0.4, stability_windows=5, max_windows=5, stability_tolerance=10.0,
                         min_duration_s=1.0, min_requests=20)
    measurement = engine.measure("identity", concurrency=4, rules=rules, workers=workers)
    assert len(measurement.windows) == 5
    server = measurement.server_model
    assert server is not None
    duration = sum(w.end_s - w.start_s for w in measurement.windows)
    assert measurement.stats.duration_s == pytest.approx(duration)
    client_count = sum(w.stats.count_ok for w in measurement.windows)
    assert measurement.stats.count_ok == client_count
    server_rate = server.inference_count / duration
    slack = (4 * 5 + 8 + 0.02 * server.inference_count) / duration
    assert measurement.stats.throughput_infer_s == pytest.approx(server_rate, abs=slack), (
        measurement.stats.throughput_infer_s, server_rate)


def test_too_short_a_run_is_invalid(engine):
    rules = MeasureRules(warmup_s=0.2, window_s=0.3, max_windows=3, stability_tolerance=10.0,
                         min_duration_s=5.0, min_requests=10)
    measurement = engine.measure("identity", concurrency=2, rules=rules)
    assert not measurement.valid
    assert "minimum 5 s" in measurement.validity_detail
    assert not measurement.trustworthy


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_both_protocols_reach_the_model(engine, protocol):
    result = engine.run(engine.closed_loop("identity", 4, duration_s=0.5, protocol=protocol))
    assert result.stats.count_ok > 20 and result.stats.count_errors == 0


def test_errors_are_counted_by_reason(engine):
    """Requests to a model that does not exist are errors with the server's reason, not successes."""
    pool = engine.pool("identity")
    from dataclasses import replace

    from pytest_triton_ready.load.requests import grpc_request

    bad = replace(pool, model="no_such_model",
                  requests=tuple(replace(r, grpc=grpc_request("no_such_model", {"INPUT0": np.zeros(16, np.float32)}))
                                 for r in pool.requests))
    engine._pools[("no_such_model", 1)] = bad
    result = engine.run(engine.closed_loop("no_such_model", 2, duration_s=0.3))
    assert result.stats.count_ok == 0
    (reason, count), = result.stats.errors.items()
    assert "no_such_model" in reason and count > 5


@pytest.mark.parametrize("seed", [1, 2])
def test_percentiles_agree_with_a_brute_force_sort(seed):
    """HdrHistogram percentiles are within its stated precision (1/1024 of the value, plus the
    microsecond the samples are rounded to) of the exact percentile: the sample of rank
    round(p/100 * n) in sorted order, HdrHistogram's definition."""
    rng = np.random.default_rng(seed)
    samples_s = rng.lognormal(mean=math.log(0.004), sigma=0.8, size=50_000)
    samples_s[:50] = rng.uniform(0.5, 2.0, size=50)  # a tail
    tally = Tally()
    for value in samples_s:
        tally.ok(float(value))
    stats = tally.summary(duration_s=1.0)
    ordered = np.sort(samples_s)
    for name, p in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p99.9", 99.9)):
        exact_ms = ordered[max(1, int(p / 100 * len(ordered) + 0.5)) - 1] * 1000
        tolerance = exact_ms * RELATIVE_PRECISION + 0.001
        assert abs(stats.percentiles_ms[name] - exact_ms) <= tolerance, (name, stats.percentiles_ms[name], exact_ms)


def test_tallies_survive_the_trip_between_processes():
    one, two = Tally(), Tally()
    for v in (0.001, 0.002, 0.003):
        one.ok(v)
    two.ok(0.010)
    two.error("UNAVAILABLE: x")
    two.drop(3)
    total = Tally.from_wire(one.to_wire())
    total.merge(Tally.from_wire(two.to_wire()))
    stats = total.summary(1.0)
    assert (stats.count_ok, stats.count_errors, stats.dropped) == (4, 1, 3)
    assert stats.max_ms == pytest.approx(10.0, rel=RELATIVE_PRECISION)


def test_windows_reach_the_callback_and_the_iterator_for_several_models(engine):
    """The soak's shape: {model: rate}, windows handed to on_window and to windows() as they close,
    each with per-model stats and the server's deltas for the same span."""
    seen = []
    traffic = engine.open_loop({"identity": 100, "slow": 5}, window_s=0.4, server_stats=True, bin_s=None,
                               on_window=seen.append, duration_s=1.3)
    traffic.start()
    iterated = list(traffic.windows(timeout_s=5))
    result = traffic.stop()
    assert [w.index for w in iterated] == [w.index for w in seen] == [0, 1, 2]
    window = iterated[1]
    assert set(window.by_model) == {"identity", "slow"}
    assert window.by_model["identity"].count_ok == pytest.approx(40, abs=8)
    assert window.by_model["slow"].count_ok == pytest.approx(2, abs=2)
    assert window.server.models["identity"].success == pytest.approx(40, abs=10)
    assert result.timeline is None
    assert result.by_model["identity"].throughput_infer_s == pytest.approx(100, rel=0.15), result.to_dict()["by_model"]


def test_bad_load_parameters_are_one_readable_error(engine):
    with pytest.raises(ValueError, match="rate for identity must be positive, got 0"):
        engine.open_loop("identity", rate=0)
    with pytest.raises(ValueError, match="concurrency for identity must be positive"):
        engine.closed_loop({"identity": -1})
    with pytest.raises(ValueError, match="exactly one of concurrency"):
        engine.measure("identity")


def test_open_loop_on_a_sequence_model_leaves_no_sequence_open(demo_server):
    """The demo's accumulate holds 4 sequence slots, each kept 10 s after its last request
    (max_sequence_idle_microseconds). Open-loop traffic that stopped mid-sequence without the END
    steps left every slot taken, so the next new sequence waited out the idle timeout: here it
    must answer within 5 s of the stop, well inside those 10 s."""
    endpoints = demo_server.endpoints
    client = TritonClient(endpoints.http_url, endpoints.grpc_url, timeout_s=5.0)
    engine = LoadEngine(client, endpoints.grpc_url, endpoints.http_url)
    try:
        with engine.open_loop("accumulate", rate=300) as traffic:
            time.sleep(1.5)
        assert traffic.result.stats.count_ok > 100
        outcome = client.infer("accumulate")  # a new one-request sequence
        assert outcome.ok, outcome.error
    finally:
        client.close()


def test_a_measurement_carries_the_load_generators_lag_and_cpu(engine):
    m = engine.measure("identity", rate=200, rules=FAST_RULES, workers=1)
    client = m.to_dict()["client"]
    assert client["cpu_s"] > 0 and client["cpu_cores"] > 0 and client["cpu_us_per_request"] > 0
    assert client["loop_lag_max_ms"] is not None and client["loop_lag_p99_ms"] <= client["loop_lag_max_ms"]
    assert isinstance(client["late_sends"], int) and client["workers"] == 1
    for window in m.to_dict()["windows"]:
        assert window["stats"]["client"]["loop_lag_max_ms"] is not None  # every window, its own lag


def test_http_binary_requests_return_what_json_requests_return(load_server):
    import urllib.request

    import tritonclient.http as httpclient

    from pytest_triton_ready.load.requests import http_request

    data = np.linspace(-3.0, 3.0, 16, dtype=np.float32)
    body, json_size = http_request({"INPUT0": data})
    url = load_server.endpoints.http_url.rstrip("/")
    url = url if url.startswith("http") else "http://" + url
    post = urllib.request.Request(f"{url}/v2/models/identity/infer", data=body, method="POST",
                                  headers={"Inference-Header-Content-Length": str(json_size)})
    with urllib.request.urlopen(post, timeout=10) as response:
        answer = response.read()
        header = response.headers.get("Inference-Header-Content-Length")
    binary = httpclient.InferenceServerClient.parse_response_body(answer, header_length=int(header) if header else None)
    tensor = httpclient.InferInput("INPUT0", [16], "FP32")
    tensor.set_data_from_numpy(data, binary_data=False)
    json_body, json_header = httpclient.InferenceServerClient.generate_request_body([tensor])
    assert json_header is None and len(body) < len(json_body)  # raw bytes after a JSON header, not a JSON list
    assert b'"data":[' in (json_body.encode() if isinstance(json_body, str) else json_body).replace(b" ", b"")
    json_post = urllib.request.Request(f"{url}/v2/models/identity/infer", method="POST",
                                       data=json_body.encode() if isinstance(json_body, str) else json_body)
    with urllib.request.urlopen(json_post, timeout=10) as response:
        answer = response.read()
        header = response.headers.get("Inference-Header-Content-Length")
    as_json = httpclient.InferenceServerClient.parse_response_body(answer, header_length=int(header) if header else None)
    assert np.array_equal(binary.as_numpy("OUTPUT0"), data)
    assert np.array_equal(as_json.as_numpy("OUTPUT0"), binary.as_numpy("OUTPUT0"))
