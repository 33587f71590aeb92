"""The performance checks (PERF-1, PERF-2, CFG-2, GPU band) run through pytester against the real
demo server, with the load rules shortened so each run takes seconds; assertions are on the
outcomes and on the report's content."""

from __future__ import annotations

import textwrap
from pathlib import Path

# In-process pytester runs forget modules first imported inside them; grpc's and numpy's C
# extensions do not survive being imported twice, so everything a run touches is imported here.
import aiohttp  # noqa: F401
import grpc  # noqa: F401
import pytest
import tritonclient.grpc  # noqa: F401
import tritonclient.http  # noqa: F401

from pytest_triton_ready.config import tuning  # noqa: F401  # noqa: F401

DATA = Path(__file__).resolve().parent / "data" / "h200-triton-2.51"
CHECKS = Path(__file__).resolve().parent.parent / "checks"

SHORT = ("--triton-threshold=load_warmup_s=0.3", "--triton-threshold=load_window_s=0.4",
         "--triton-threshold=load_min_duration_s=1.2", "--triton-threshold=load_min_requests=30",
         "--triton-threshold=load_max_windows=6", "--triton-threshold=load_stability_tolerance=0.6",
         "--triton-threshold=curve_max_concurrency=8")

FACTS_READER = textwrap.dedent('''
    import pytest

    from pytest_triton_ready.facts import Capacity

    @pytest.mark.triton_check("OPS-2")
    def test_reads_capacity(triton_facts, check):
        """Reads what PERF-2 published."""
        capacity = triton_facts.require(Capacity, model="scale").to_json()
        assert set(capacity) == {"max_throughput_within_slo_infer_s", "p99_ms", "concurrency", "instances",
                                 "slo_p99_ms", "lower_bound", "server_cpu_cores", "throughput_low_infer_s", "level"}
        for key in ("max_throughput_within_slo_infer_s", "p99_ms", "concurrency"):
            check.measure(key, capacity[key])
        check.measure("instances", capacity["instances"], threshold=1, comparison=">=")
        check.measure("slo_p99_ms", capacity["slo_p99_ms"])
''')


def _measures(result, model=None):
    return {m["name"]: m for m in result["measurements"] if model is None or m["model"] == model}


def test_performance_phase_on_the_demo_scale_model(run_checklist, pytester):
    """PERF-1 passes with latency percentiles and server times, PERF-2 draws its curve and
    publishes the capacity facts a later check reads, CFG-2 sees batches larger than one."""
    reader = pytester.makepyfile(test_facts_reader=FACTS_READER)
    run = run_checklist("test_performance.py", str(reader), url="own",
                        args=("--triton-models=scale", "--triton-slo-p99-ms=500", *SHORT))
    perf1 = run.result("test_benchmark_meets_slo_at_target_load")
    assert perf1["verdict"] == "pass", perf1
    m = _measures(perf1, "scale")
    assert m["p99 latency"]["threshold"] == 500 and m["p99 latency"]["passed"]
    assert m["throughput"]["unit"] == "infer/s" and m["throughput"]["value"] > 50
    assert m["server compute_infer time per request"]["value"] > 0
    assert m["client CPU per request"]["unit"] == "us"

    perf2 = run.result("test_throughput_latency_curve")
    assert perf2["verdict"] == "pass", perf2
    chart = perf2["charts"][0]
    assert chart["x_label"] == "throughput (infer/s)" and chart["y_label"] == "latency (ms)"
    assert len(chart["series"][1]["points"]) >= 3  # p99 at concurrency 1, 2, 4, 8
    m = _measures(perf2, "scale")
    # curve_max_concurrency=8 bounds the capacity search: still rising there, the capacity is a lower bound;
    # a plateau before it (no confirmed gain over the last doublings) ends the sweep earlier, saying so
    capacity_name = "max throughput within SLO"
    assert {"throughput at concurrency 1", "knee concurrency", capacity_name} <= set(m)
    swept = sorted(int(name.rsplit(" ", 1)[1]) for name in m if name.startswith("throughput at concurrency "))
    assert swept[-1] == 8 or any("throughput stopped rising" in f["message"] for f in perf2["findings"]), swept
    if m["capacity is a lower bound"]["value"] == "yes":
        assert any(f["message"].startswith("scale: capacity >= ") for f in perf2["findings"])
    assert any(e["label"] == "knee and capacity" for e in perf2["evidence"])

    reader_result = run.result("test_reads_capacity")
    assert reader_result["verdict"] == "pass", reader_result
    facts = _measures(reader_result)
    assert facts["instances"]["value"] == 2
    assert facts["slo_p99_ms"]["value"] == 500
    assert abs(facts["max_throughput_within_slo_infer_s"]["value"] - m[capacity_name]["value"]) < 0.1
    assert facts["concurrency"]["value"] in (1, 2, 4, 8)

    cfg2 = run.result("test_dynamic_batching_under_stress")
    assert cfg2["verdict"] in ("pass", "fail"), cfg2
    m = _measures(cfg2, "scale")
    assert m["saturation concurrency"]["value"] == 8
    assert m["average batch size"]["value"] > 1.0, m["average batch size"]
    # the statistics API and the Prometheus counters tell the same story
    assert m["average batch size (metrics)"]["value"] == pytest.approx(m["average batch size"]["value"], rel=0.25)
    assert m["queue share of server latency"]["unit"] == "ratio"

    gpu = run.result("test_gpu_utilization_under_load")
    assert gpu["verdict"] == "not_applicable" and "GPU" in gpu["reason"]


def test_curve_shows_each_point_as_it_runs_and_writes_it_to_curves_csv(run_checklist):
    """PERF-2 says on the terminal which curve point it measures while it runs (lines from 0.5 s on:
    --triton-progress-after), and curves.csv carries each point's percentiles, mean and the
    server's stage times in perf_analyzer's columns, Client Send/Recv (never measured) empty."""
    import csv
    import re

    run = run_checklist("test_performance.py", url="own", args=("--triton-models=scale", "--triton-slo-p99-ms=500",
                                                               *SHORT, "-k", "throughput_latency",
                                                               "--triton-progress-after=0.5"))
    perf2 = run.result("test_throughput_latency_curve")
    assert perf2["verdict"] == "pass", perf2
    measured = [p["concurrency"] for p in perf2["load_points"]]
    assert measured[:4] == [1, 2, 4, 8], measured
    step = re.compile(r"^  PERF-2 test_throughput_latency_curve \.\.\. \d+ s: scale: concurrency (\d+) "
                      r"\(point (\d+), search bound (\d+)\)$")
    shown = [m.groups() for m in map(step.match, run.outcome.outlines) if m]
    assert sorted({(int(c), int(n)) for c, n, _ in shown}) == [(c, i) for i, c in enumerate(measured, start=1)], (
        "\n".join(run.outcome.outlines))
    assert {bound for _, _, bound in shown} == {"8"}  # curve_max_concurrency bounds the search

    with (run.report_dir / "curves.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["Model"], int(r["Concurrency"])) for r in rows] == [("scale", c) for c in sorted(measured)]
    for row in rows:
        assert row["Client Send (us)"] == row["Client Recv (us)"] == "", row
        latency = [int(row[f"{p} latency (us)"]) for p in ("p50", "p90", "p95", "p99")]
        assert 0 < latency[0] <= latency[1] <= latency[2] <= latency[3], row
        server = [int(row[f"Server {stage} (us)"]) for stage in ("Queue", "Compute Input", "Compute Infer",
                                                                  "Compute Output")]
        assert server[2] > 0 and all(v >= 0 for v in server), row
        mean, rest = int(row["Avg latency (us)"]), int(row["Network+Server Send/Recv (us)"])
        assert rest >= 0 and (rest == 0 or abs(rest + sum(server) - mean) <= 4), row  # rounding of 5 numbers
        assert float(row["Inferences/Second"]) > 0 and row["Stable and Valid"] in ("yes", "no")


def test_an_slo_the_model_cannot_meet_fails_perf1_and_perf2(run_checklist):
    run = run_checklist("test_performance.py", url="own", args=("--triton-models=scale", "--triton-slo-p99-ms=0.05", *SHORT,
                                                     "-k", "benchmark or curve"))
    perf1 = run.result("test_benchmark_meets_slo_at_target_load")
    assert perf1["verdict"] == "fail", perf1
    assert any("exceeds the 0.05 ms budget" in f["message"] for f in perf1["findings"])
    perf2 = run.result("test_throughput_latency_curve")
    assert perf2["verdict"] == "fail"
    assert any("no concurrency keeps p99 within 0.05 ms" in f["message"] for f in perf2["findings"])


def test_an_unstable_measurement_whose_rules_are_decided_is_judged_with_stability_as_evidence(run_checklist):
    """A stability tolerance no real run can meet no longer blocks the verdict: PERF-1's rules are
    decided on their intervals (p99 far inside a 500 ms budget), and the spread is shown as evidence."""
    args = [a for a in SHORT if "stability_tolerance" not in a]
    run = run_checklist("test_performance.py", args=("--triton-models=scale", "--triton-slo-p99-ms=500", *args,
                                                     "-k", "benchmark",
                                                     "--triton-threshold=load_stability_tolerance=0.0001"))
    perf1 = run.result("test_benchmark_meets_slo_at_target_load")
    assert perf1["verdict"] == "pass", perf1
    m = _measures(perf1, "scale")
    assert m["measurement stable"]["value"] == "False" and m["measurement valid"]["value"] == "True"
    evidence = {e["label"]: e["text"] for e in perf1["evidence"]}
    assert "spread" in evidence["scale: window stability"]
    margin = evidence["scale: p99 latency: margin"]
    assert "95% interval [" in margin and "ms, rule <= 500 ms: pass (margin +" in margin


FAILING = Path(__file__).resolve().parent / "repositories" / "failing"


def test_a_model_failing_every_request_fails_perf1_on_its_success_rate(run_checklist):
    """Success before validity: every request raises, so no measurement is valid (0 requests
    completed), and PERF-1 FAILS on the success rate naming the error, not INCOMPLETE."""
    run = run_checklist("test_performance.py", url=None, args=(
        "--triton-launch=embedded", f"--triton-model-repository={FAILING}", "--triton-models=always_raises",
        *SHORT, "-k", "benchmark"))
    perf1 = run.result("test_benchmark_meets_slo_at_target_load")
    assert perf1["verdict"] == "fail", perf1
    errors = [f["message"] for f in perf1["findings"] if f["severity"] == "error"]
    assert any(m.startswith("always_raises: success rate 0.00% is below 0.999; errors: ") for m in errors), errors
    assert "always_raises refuses every request" in " ".join(errors)
    success = _measures(perf1, "always_raises")["success rate"]
    assert success["value"] == 0.0 and success["passed"] is False


def test_target_load_from_min_throughput_runs_open_loop(run_checklist):
    """With a min_throughput SLO, PERF-1 offers that rate (Poisson) and compares achieved/offered."""
    # Poisson arrivals: 3 windows of 1 s hold about 300 requests (sd 17, 6%), so 0.8-1.2 is over 3 sd
    # wide; SHORT's 0.4 s windows held 120 (sd 9%) and tipped over 1.2 about one run in twenty.
    # The success rate is decided on its exact binomial interval: 0.999 would need 4,786 clean requests
    # at a look's level (48 s at 100 requests/s); 0.98 needs 237, which these windows hold.
    run = run_checklist("test_performance.py", args=("--triton-models=scale", "--triton-slo-p99-ms=500",
                                                     "--triton-slo-min-throughput=100", *SHORT,
                                                     "--triton-threshold=load_window_s=1.0",
                                                     "--triton-threshold=success_rate_min=0.98", "-k", "benchmark"))
    perf1 = run.result("test_benchmark_meets_slo_at_target_load")
    assert perf1["verdict"] == "pass", (perf1["reason"], perf1["findings"], perf1["measurements"])
    m = _measures(perf1, "scale")
    assert "offered load (Poisson)" not in m  # a configured value is a setting, never a measurement
    assert {"name": "offered load (Poisson)", "value": 100.0, "unit": "infer/s", "model": "scale",
            "source": "slo.min_throughput"} in perf1["settings"]
    assert m["achieved / offered throughput"]["passed"] is True
    assert 0.8 <= m["throughput"]["value"] / 100 <= 1.2
    # 100 - 3 sqrt(100 / D) for the D seconds measured: 78.8 infer/s at 2 windows of 1 s (a rule decided
    # at the first look), 82.7 at 3, 86.6 at 6
    judged = m["throughput vs min_throughput"]
    assert judged["passed"] is True and judged["comparison"] == ">=" and 78 < judged["threshold"] < 90
    assert m["backlog (in flight beyond rate x mean latency)"]["value"] is not None


def test_cfg2_not_applicable_without_a_batching_model(run_checklist):
    run = run_checklist("test_performance.py", args=("--triton-models=accumulate", *SHORT, "-k", "batching"))
    cfg2 = run.result("test_dynamic_batching_under_stress")
    assert cfg2["verdict"] == "not_applicable", cfg2


def test_gpu_band_reads_real_h200_metrics(run_checklist, pytester):
    """No GPU here: the `gpu` fixture reads a real H200 capture (44% utilization under a load its
    client could not push harder). The check's real path must fail the 70% floor and recommend."""
    pytester.makeconftest(textwrap.dedent(f'''
        import pytest
        from pytest_triton_ready.server.gpu import GpuReader
        from pytest_triton_ready.server.metrics import MetricsSnapshot

        CAPTURE = {str(DATA / "metrics_load.txt")!r}

        @pytest.fixture(scope="session")
        def gpu():
            text = open(CAPTURE).read()
            return GpuReader(lambda: MetricsSnapshot.parse(text), same_host=False)
    '''))
    checks = pytester.path / "gpu_checks"  # the conftest applies to the checks copied beside it
    checks.mkdir()
    (checks / "test_gpu_band_copy.py").write_text((CHECKS / "test_performance.py").read_text())
    (checks / "conftest.py").write_text((pytester.path / "conftest.py").read_text())
    run = run_checklist(str(checks / "test_gpu_band_copy.py"), args=("--triton-models=scale", *SHORT, "-k", "gpu"))
    gpu = run.result("test_gpu_utilization_under_load")
    assert gpu["verdict"] == "fail", gpu
    m = _measures(gpu)
    assert m["GPU utilization (mean)"]["value"] == pytest.approx(0.44)
    assert m["GPU utilization (mean)"]["threshold"] == 0.70
    assert any("add model instances" in r for r in gpu["recommendations"])
    assert gpu["charts"][0]["title"] == "GPU utilization under load"


def test_tune_batching_measures_delays_and_restores_the_config(run_checklist, demo_server):
    """--triton-tune-batching reloads `scale` with config overrides for each delay, recommends one
    and leaves the server with the original max_queue_delay_microseconds."""
    from pytest_triton_ready.server.client import TritonClient

    endpoints = run_checklist.own_server().endpoints
    client = TritonClient(endpoints.http_url, endpoints.grpc_url)
    before = client.model_config("scale", fresh=True)["dynamic_batching"]["max_queue_delay_microseconds"]
    run = run_checklist("test_performance.py", url="own", args=("--triton-models=scale", "--triton-slo-p99-ms=500", *SHORT,
                                                     "-k", "batching", "--triton-tune-batching"))
    cfg2 = run.result("test_dynamic_batching_under_stress")
    m = _measures(cfg2, "scale")
    assert {"throughput at max_queue_delay 0 us", "throughput at max_queue_delay 10000 us"} <= set(m), sorted(m)
    assert any("set max_queue_delay_microseconds to" in r for r in cfg2["recommendations"]), cfg2["recommendations"]
    assert not any("could not be restored" in f["message"] for f in cfg2["findings"])
    after = client.model_config("scale", fresh=True)["dynamic_batching"]["max_queue_delay_microseconds"]
    client.close()
    assert after == before


def test_a_budget_too_small_for_the_sweep_cuts_it_incomplete_naming_the_budget(run_checklist):
    """A run budget PERF-2's sweep cannot fit in: the points after its share is spent are not
    measured, and PERF-2 is INCOMPLETE naming the budget and what it left out, never PASS."""
    run = run_checklist("test_performance.py", args=("--triton-models=scale", *SHORT, "-k", "curve",
                                                     "--triton-budget=2s"))
    perf2 = run.result("test_throughput_latency_curve")
    assert perf2["verdict"] == "incomplete", perf2
    assert perf2["reason"].startswith("run budget 0:02 (run.budget / --triton-budget) "), perf2["reason"]
    assert "left out: the measurement of scale at concurrency " in perf2["reason"]
    assert "time estimate: about" in run.outcome.stdout.str()  # the plan showed the estimate first
