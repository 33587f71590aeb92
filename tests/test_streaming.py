"""The streaming checklist (checks/test_streaming.py) against real embedded Triton servers on
tests/repositories/streaming: the healthy demo `generate` model passes every item with TTFT, ITL and
tokens/s in the report and JUnit (only the dead-stub item fails, on Triton 2.51's own behaviour);
`slow_first` (300 ms to the first token) fails PERF-1 against a
100 ms TTFT SLO; `stalls` (1.5 s before 2% of its tokens) fails PERF-1 on ITL with the quick
configuration and short streams, where the healthy `generate` passes; `missing_final` (1 request in 100 never gets its final
flag) fails the stream soak naming the stuck requests; `generate_threads` (tokens from threads after execute() returned) shows
Triton 2.51 unloading the model under live streams at SIGTERM; the demo repository (no decoupled
model) gets NOT APPLICABLE; and the whole checklist against the packaged streaming demo ends READY."""

from __future__ import annotations

import datetime as dt
import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import QUICK_CHECKLIST, REPO_ROOT
from pytest_triton_ready.load.streaming.traffic import STREAMING_DEMO_REPOSITORY
from pytest_triton_ready.thresholds import THRESHOLDS

REPOSITORY = Path(__file__).resolve().parent / "repositories" / "streaming"
# Short streams (4 tokens: 40 ms a request at 1 stream) so that each measurement holds the 368-477
# requests a TTFT or ITL p99 needs before its interval is bounded above (load/confidence.py).
QUICK = ("--triton-threshold=streaming_duration_s=2", "--triton-threshold=streaming_soak_s=4",
         "--triton-threshold=streaming_curve_max_concurrency=4", "--triton-threshold=streaming_curve_point_s=1",
         "--triton-threshold=streaming_final_deadline_s=3", "--triton-threshold=streaming_min_requests=3",
         "--triton-threshold=streaming_max_tokens=4")


def _own_server(model: str, *extra: str) -> tuple[str, ...]:
    return ("--triton-launch=embedded", f"--triton-model-repository={REPOSITORY}", f"--triton-models={model}",
            *QUICK, *extra)


def _measures(result, model):
    return {m["name"]: m for m in result["measurements"] if m["model"] == model}


def test_healthy_streaming_model_passes_every_streaming_check(run_checklist, pytester):
    junit = pytester.path / "junit.xml"
    run = run_checklist("test_streaming.py", url=None, args=(*_own_server("generate"), f"--junitxml={junit}",
                                                            "--triton-progress-after=0.5"))
    report = run.report
    curve = [line.split(" s: ", 1)[-1] for line in run.outcome.outlines
             if line.startswith("  PERF-2 test_streaming_tokens_and_ttft_curve ... ")]
    assert [f"generate: {c} streams (point {n} of 3, 1 s, longer while undecided)" for n, c in ((1, 1), (2, 2), (3, 4))] == [
        step for step in curve if "streams (point" in step and not step.startswith("waiting for")], curve
    assert any(line.startswith("  PERF-3 test_streaming_soak_every_request_finishes ... ")
               for line in run.outcome.outlines)  # the stream soak is not the soak with a line of its own
    verdicts = {r["nodeid"].split("::")[-1]: r["verdict"] for r in report["results"]}
    assert verdicts == {
        "test_streaming_answers_end_with_final_flag": "pass",
        # 2.51 has no first-response histogram: the request counter is judged, TTFT agreement named as not judged
        "test_streaming_first_response_histogram_matches_ttft": "pass",
        "test_streaming_slo_at_target_load": "pass",
        "test_streaming_tokens_and_ttft_curve": "pass",
        "test_streaming_soak_every_request_finishes": "incomplete",  # 4 s cannot judge the leak rule
        "test_streaming_cancellation_leaves_instances_serving": "pass",
        # Triton 2.51, not the model: the ready endpoints hide a dead stub, and the streams it served hang
        "test_streaming_dead_stub_is_reported_and_recovers": "fail",
    } | {"test_streaming_sigterm_ends_streams_cleanly": verdicts["test_streaming_sigterm_ends_streams_cleanly"]}, verdicts
    assert report["verdict"] == "NOT READY" and run.outcome.ret == 1
    dead = run.result("test_streaming_dead_stub_is_reported_and_recovers")
    messages = [f["message"] for f in dead["findings"] if f["severity"] == "error"]
    assert any("Triton 2.51.0 shows a dead python stub on model readiness only from 2.64 (25.12)" in m
               for m in messages), messages
    assert all("2.51.0" in m or "no final response" in m or "hanging" in m for m in messages), messages
    assert _measures(dead, "generate")["streaming again after unload + load"]["passed"]

    perf1 = _measures(run.result("test_streaming_slo_at_target_load"), "generate")
    assert 15 < perf1["TTFT p50"]["value"] < 300 and perf1["TTFT p99"]["threshold"] == 1000
    assert 4 < perf1["ITL p50"]["value"] < 100 and perf1["ITL p99"]["passed"]
    assert perf1["output tokens/s"]["unit"] == "tokens/s" and perf1["output tokens/s"]["value"] > 100
    assert perf1["stuck requests"]["value"] == 0
    cfg1 = _measures(run.result("test_streaming_answers_end_with_final_flag"), "generate")
    assert cfg1["final flag received"]["value"] is True and cfg1["output tokens"]["value"] == 8
    assert cfg1["generate_stream chunks"]["value"] == 4
    mon1 = run.result("test_streaming_first_response_histogram_matches_ttft")
    assert "TTFT agreement not judged" in mon1["reason"] and "2.52" in mon1["reason"]
    mon1_numbers = _measures(mon1, "generate")
    assert mon1_numbers["client TTFT p50"]["value"] > 0
    counter = mon1_numbers["server nv_inference_request_success rise"]
    assert counter["passed"] and counter["value"] >= mon1_numbers["requests the client completed"]["value"] >= 1
    perf2 = run.result("test_streaming_tokens_and_ttft_curve")
    assert [c["x_label"] for c in perf2["charts"]] == ["concurrency (streams)", "concurrency (streams)"]
    lengths = [e["text"] for e in perf2["evidence"] if "measurement length" in e["label"]]
    assert len(lengths) == 3 and all(t.startswith(("decided at the look after", "measured to its longest")) for t in lengths)
    print("PERF-2 point lengths:", lengths)
    print("PERF-1 length:", [e["text"] for e in run.result("test_streaming_slo_at_target_load")["evidence"]
                             if "measurement length" in e["label"]])
    drawn = [[s["name"] for s in c["series"]] for c in perf2["charts"]]
    assert drawn[0][:3] == ["tokens/s", "tokens/s 95% interval low", "tokens/s 95% interval high"], drawn
    assert drawn[1][:3] == ["TTFT p99", "TTFT p99 95% interval low", "TTFT p99 95% interval high"], drawn
    # The demo keeps its requests inside Triton's iterative sequence batcher: SIGTERM drains them first
    sigterm = run.result("test_streaming_sigterm_ends_streams_cleanly")
    perf4 = _measures(sigterm, "generate")
    assert sigterm["verdict"] == "pass", json.dumps(sigterm, indent=1)[:4000]
    assert perf4["exit code"]["value"] == 0 and perf4["of them cut off without a final response"]["value"] == 0
    assert perf4["in-flight inferences Triton counted at SIGTERM"]["value"] >= 1
    assert perf4["streams in flight at SIGTERM"]["value"] >= 1
    assert not [f for f in sigterm["findings"] if f.get("rule") == "shutdown-drain"]

    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    props = [(p.get("name"), p.get("value")) for p in cases["test_streaming_slo_at_target_load"].iter("property")]
    assert any("TTFT p99" in name for name, _ in props) and any("ITL p99" in name for name, _ in props), props


def test_slow_first_token_fails_perf1_against_a_100ms_ttft_slo(run_checklist):
    run = run_checklist("test_streaming.py", url=None,
                        args=(*_own_server("slow_first", "--triton-threshold=streaming_ttft_p99_ms=100"),
                              "-k", "slo_at_target_load or final_flag"))
    perf1 = run.result("test_streaming_slo_at_target_load")
    assert perf1["verdict"] == "fail", perf1
    ttft = _measures(perf1, "slow_first")["TTFT p99"]
    assert ttft["value"] >= 300 and ttft["threshold"] == 100 and ttft["passed"] is False
    assert any("slow_first: TTFT p99 is" in f["message"] and "the SLO is <= 100 ms" in f["message"]
               for f in perf1["findings"]), perf1["findings"]
    # only the first token is slow: ITL does not fail (its p99 may stay unbounded on the few
    # requests a 300 ms first token leaves: it is then measured without a threshold)
    assert _measures(perf1, "slow_first")["ITL p99"]["passed"] is not False
    assert run.result("test_streaming_answers_end_with_final_flag")["verdict"] == "pass"
    assert run.outcome.ret == 1


def test_stalls_between_tokens_fail_perf1_on_itl_with_the_quick_configuration(run_checklist):
    """A request's ITL is its mean gap between tokens: in a stream of 4 tokens a 1.5 s stall makes it
    500 ms, and some 6% of the requests hold one (a stall before 2% of the tokens), so the ITL p99 is
    decided above the 200 ms default even on the quick configuration's short measurement, where the
    healthy model's ITL p99 is decided below it."""
    quick = (f"--triton-config={QUICK_CHECKLIST}", "--triton-threshold=streaming_max_tokens=4",
             "-k", "slo_at_target_load")
    base = ("--triton-launch=embedded", f"--triton-model-repository={REPOSITORY}")
    run = run_checklist("test_streaming.py", url=None, args=(*base, "--triton-models=stalls", *quick))
    perf1 = run.result("test_streaming_slo_at_target_load")
    itl = _measures(perf1, "stalls")["ITL p99"]
    assert perf1["verdict"] == "fail" and itl["passed"] is False, json.dumps(perf1, indent=1)[:4000]
    assert itl["value"] >= 400 and itl["threshold"] == THRESHOLDS["streaming_itl_p99_ms"].default
    assert any("stalls: ITL p99" in f["message"] for f in perf1["findings"] if f["severity"] == "error"), perf1
    assert run.outcome.ret == 1
    healthy = run_checklist("test_streaming.py", url=None, args=(*base, "--triton-models=generate", *quick))
    result = healthy.result("test_streaming_slo_at_target_load")
    assert result["verdict"] == "pass", json.dumps(result, indent=1)[:4000]
    print(f"stalls ITL p99 {itl['value']} ms; generate ITL p99 {_measures(result, 'generate')['ITL p99']['value']} ms")


def test_a_healthy_one_response_stream_passes_perf1_with_itl_not_applicable(run_checklist):
    """A decoupled model that answers each request with one response and the final flag (as
    Triton's QA model async_execute_decouple does) has no inter-token latency: streaming PERF-1 is
    decided on TTFT, the success rate and stuck requests, and says why ITL is not judged."""
    from pytest_triton_ready.performance.streaming_target import SINGLE_RESPONSE

    run = run_checklist("test_streaming.py", url=None,
                        args=(*_own_server("one_response"), "-k", "slo_at_target_load or final_flag"))
    perf1 = run.result("test_streaming_slo_at_target_load")
    assert perf1["verdict"] == "pass", json.dumps(perf1, indent=1)[:4000]
    measured = _measures(perf1, "one_response")
    assert measured["TTFT p99"]["passed"] is True and not measured.keys() & {"ITL p99", "ITL p50"}
    assert SINGLE_RESPONSE in [e["text"] for e in perf1["evidence"]]
    assert run.result("test_streaming_answers_end_with_final_flag")["verdict"] == "pass"


def test_missing_final_flag_fails_the_stream_soak_naming_the_requests(run_checklist):
    run = run_checklist("test_streaming.py", url=None,
                        args=(*_own_server("missing_final", "--triton-threshold=streaming_soak_s=10"), "-k", "soak"))
    soak = run.result("test_streaming_soak_every_request_finishes")
    assert soak["verdict"] == "fail", soak
    stuck = _measures(soak, "missing_final")["stuck requests"]
    assert stuck["value"] >= 1 and stuck["passed"] is False
    named = [f["message"] for f in soak["findings"] if "no final response after" in f["message"]]
    assert named and all(m.startswith("missing_final: request u") and " tokens in " in m for m in named), soak["findings"]
    assert any("TRITONSERVER_RESPONSE_COMPLETE_FINAL" in r for r in soak["recommendations"])


def test_sigterm_names_a_drain_that_does_not_see_released_streams(run_checklist):
    """`generate_threads` returns from execute() at once: Triton 2.51 counts none of its streams as
    in flight at SIGTERM and unloads it under them (a warning when nothing was lost this time; when
    the gRPC frontend aborts in that window, the exit code and the cut streams fail the check)."""
    run = run_checklist("test_streaming.py", url=None, args=(*_own_server("generate_threads"), "-k", "sigterm"))
    sigterm = run.result("test_streaming_sigterm_ends_streams_cleanly")
    perf4 = _measures(sigterm, "generate_threads")
    assert perf4["in-flight inferences Triton counted at SIGTERM"]["value"] == 0, sigterm
    drain = [f for f in sigterm["findings"] if f.get("rule") == "shutdown-drain"]
    assert len(drain) == 1 and "Triton 2.51.0 counted none of the" in drain[0]["message"], sigterm["findings"]
    assert "streams in flight at SIGTERM as in-flight inferences" in drain[0]["message"]
    assert any("iterative sequence batching" in r and "#7969" in r for r in sigterm["recommendations"])
    if sigterm["verdict"] == "pass":
        assert drain[0]["severity"] == "warning" and perf4["exit code"]["value"] == 0
    else:  # the abort this leaves room for: named with its cause
        messages = " ".join(f["message"] for f in sigterm["findings"] if f["severity"] == "error")
        assert drain[0]["severity"] == "error" and "it aborted (" in messages, messages
        assert "while it was unloading the model under streams it had not counted as in flight" in messages


def _ready_settings(path: Path) -> Path:
    """Settings for a production-shaped streaming deployment: the examples' alert rules, dashboard
    and log shipping, restricted APIs with their key, fresh attestations, a capacity plan for
    `generate`, short measurements (short streams, so that a TTFT p99 has the 477 requests its
    interval needs at a look: 3 s at 8 streams, 5 s a curve point); waived only what the demo
    cannot have."""
    today = dt.date.today().isoformat()
    key = "streaming-demo-admin-key-5b1f0c"
    apis = "model-repository,shared-memory,logging,trace"
    examples = REPO_ROOT / "examples" / "monitoring"
    path.write_text(textwrap.dedent(f"""
        server:
          args: [--log-format=ISO8601, "--http-restricted-api={apis}:admin-key={key}",
                 "--grpc-restricted-protocol={apis}:admin-key={key}"]
          headers: {{admin-key: "{key}"}}
        monitoring:
          alert_rules: [{examples / "alerts.yaml"}]
          dashboard: {examples / "dashboard.json"}
          log_shipping: {{collector: fluent-bit, stdout: true, files: []}}
        operations:
          attestations:
            hot_update_runbook: {{link: "https://wiki.example.com/runbooks/llm-hot-update", owner: ml-platform, date: {today}}}
            disaster_recovery: {{link: "https://wiki.example.com/dr-drill", owner: sre, date: {today}}}
            team_training: {{link: "https://wiki.example.com/triton-training", owner: ml-platform, date: {today}}}
          capacity:
            peak_rate: {{generate: 5}}
            fleet: {{gpus: 1}}
        gate:
          waivers:
            - {{check: PERF-5, reason: "a first run has no baseline to compare with", owner: tests, expires: 2099-01-01}}
            - {{check: test_streaming_dead_stub_is_reported_and_recovers, owner: tests, expires: 2099-01-01,
               reason: "Triton 2.51's ready endpoints hide a dead python stub (fixed in 2.64 and 2.68)"}}
            - {{check: test_streaming_soak_every_request_finishes, owner: tests, expires: 2099-01-01,
               reason: "a 4 s stream soak cannot judge the leak rule; the nightly soak does"}}
        thresholds:
          load_warmup_s: 0.3
          load_window_s: 0.4
          load_min_duration_s: 1.2
          load_min_requests: 30
          streaming_duration_s: 3
          streaming_soak_s: 4
          streaming_curve_max_concurrency: 4
          streaming_curve_point_s: 5
          streaming_final_deadline_s: 3
          streaming_min_requests: 3
          streaming_max_tokens: 4
        soak:
          duration: 4s
          window: 1s
    """))
    return path


def test_a_deployment_of_only_streaming_models_ends_ready(run_checklist, pytester):
    """The whole checklist against the packaged streaming demo (only the decoupled `generate`), on a
    server the run starts: READY, every unary item either deferring to its streaming counterpart
    (NOT APPLICABLE, naming it) or run on the streaming model under streamed traffic, TTFT, ITL and
    tokens/s in readiness.json, the HTML report and JUnit."""
    from pytest_triton_ready.monitoring.prometheus import find_prometheus

    if find_prometheus() is None:
        pytest.skip("the prometheus binary is not installed (apt-get install prometheus): MON-2 cannot pass")
    junit = pytester.path / "junit.xml"
    settings = _ready_settings(pytester.path / "triton-ready.yaml")
    run = run_checklist(url=None, args=("--triton-launch=embedded", f"--triton-model-repository={STREAMING_DEMO_REPOSITORY}",
                                        f"--triton-config={settings}", f"--junitxml={junit}"))
    report = run.report
    results = {r["nodeid"].split("::")[-1]: r for r in report["results"]}
    summary = {name: (r["verdict"], r.get("reason")) for name, r in results.items()}
    assert run.outcome.ret == 0 and report["verdict"] == "READY", json.dumps(summary, indent=1)
    assert report["scope"]["not_run"] == []
    assert {(w["check_id"], w["check"]) for w in report["scope"]["waived"]} == {
        ("PERF-5", "PERF-5"), ("PERF-4", "test_streaming_dead_stub_is_reported_and_recovers"),
        ("PERF-3", "test_streaming_soak_every_request_finishes")}

    deferred = {  # unary check -> the streaming check its NOT APPLICABLE names
        "test_models_answer_inference": "test_streaming_answers_end_with_final_flag (CFG-1)",
        "test_benchmark_meets_slo_at_target_load": "test_streaming_slo_at_target_load (PERF-1)",
        "test_throughput_latency_curve": "test_streaming_tokens_and_ttft_curve (PERF-2)",
        "test_soak_stability": "test_streaming_soak_every_request_finishes (PERF-3)",
        "test_dead_instance_is_reported_and_recovers": "test_streaming_dead_stub_is_reported_and_recovers (PERF-4)",
        "test_sigterm_under_traffic_is_graceful": "test_streaming_sigterm_ends_streams_cleanly (PERF-4)",
    }
    for name, counterpart in deferred.items():
        assert results[name]["verdict"] == "not_applicable", (name, results[name])
        assert results[name]["reason"].startswith(f"every READY model in scope is decoupled (generate): {counterpart}")
    # the unary fault experiments without a streaming counterpart run on `generate` under streamed traffic
    for name, lost in (("test_forced_reload_under_traffic_loses_no_request", "failed requests during the forced reload"),
                       ("test_new_version_rollout_under_traffic_loses_no_request",
                        "failed requests during the rollout of version 2"),
                       ("test_server_crash_restart_answers_correctly", "time from SIGKILL until the first correct inference")):
        assert results[name]["verdict"] == "pass", (name, json.dumps(results[name], indent=1)[:3000])
        assert _measures(results[name], "generate")[lost]["value"] is not None
    assert _measures(results["test_forced_reload_under_traffic_loses_no_request"], "generate")[
        "failed requests during the forced reload"]["value"] == 0
    assert results["test_hot_update_procedure_documented_and_exercised"]["verdict"] == "pass"  # OPS-1: that reload
    ops2 = results["test_capacity_plan_carries_declared_peak"]
    arithmetic = next(e["text"] for e in ops2["evidence"] if e["label"] == "capacity arithmetic")
    assert "generate: measured" in arithmetic and "measured TTFT p99" in arithmetic
    assert "decoupled; its capacity is the streaming curve's requests/s" in arithmetic
    sec3 = results["test_malformed_requests_get_clean_errors"]
    assert sec3["verdict"] == "pass" and {m["name"]: m["value"] for m in sec3["measurements"]}["oversize payload"] == "clean error"
    layers = results["test_four_metric_layers_readable"]
    assert layers["verdict"] == "pass" and any("iterative sequence batching" in f["message"] for f in layers["findings"])
    sigterm = _measures(results["test_streaming_sigterm_ends_streams_cleanly"], "generate")
    assert sigterm["exit code"]["value"] == 0 and sigterm["in-flight inferences Triton counted at SIGTERM"]["value"] >= 1

    numbers = report["key_numbers"]["generate"]
    assert numbers["ttft_p99"] > 0 and numbers["itl_p99"] > 0 and numbers["tokens_capacity"] > 100, numbers
    html = (run.report_dir / "readiness.html").read_text()
    for heading in ("TTFT p99 at target load (ms)", "ITL p99 at target load (ms)",
                    "output tokens/s within TTFT SLO (tokens/s)"):
        assert heading in html, heading
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    for name in ("measurement generate: TTFT p99", "measurement generate: ITL p99", "measurement generate: output tokens/s"):
        assert props.get(name, "").split()[-1] in ("ms", "tokens/s"), (name, props.get(name))


def test_perf5_measures_streaming_noise_and_fails_a_token_capacity_drop(run_checklist, tmp_path):
    """PERF-5 on a decoupled model: it streams at PERF-2's best concurrency three times, records the
    repeat-to-repeat spread as the model's noise, and a baseline with twice the token capacity is a
    regression decided on the first look (the second look cannot clear it)."""
    args = (*_own_server("generate"), "-k", "tokens_and_ttft_curve or regression")
    first = run_checklist("test_streaming.py", "test_regression.py", url=None, args=args)
    assert first.result("test_no_regression_against_baseline")["verdict"] == "incomplete"  # no baseline yet
    document = json.loads(json.dumps(first.report))
    for result in document["results"]:
        for m in result["measurements"]:
            if result["check_id"] == "PERF-2" and m["name"] == "max output tokens/s within TTFT SLO":
                m["value"] = round(m["value"] * 2.0, 1)
    document["verdict"] = "READY"
    doctored = tmp_path / "doctored.json"
    doctored.write_text(json.dumps(document))
    worse = run_checklist("test_streaming.py", "test_regression.py", url=None,
                          args=(*args, f"--triton-baseline={doctored}"))
    perf5 = worse.result("test_no_regression_against_baseline")
    measured = _measures(perf5, "generate")
    assert measured["streaming noise measured at concurrency"]["value"] >= 1
    assert measured["noise: output tokens/s repeat spread (relative standard error)"]["value"] >= 0
    assert perf5["verdict"] == "fail", json.dumps(perf5, indent=1)[:3000]
    [drop] = [f["message"] for f in perf5["findings"] if f["severity"] == "error"
              and "output tokens/s within TTFT SLO" in f["message"]]
    assert "decided on the first look" in drop and "second look" not in drop, drop  # no second look clears it


def test_deployment_without_decoupled_models_is_not_applicable(run_checklist):
    run = run_checklist("test_streaming.py", args=("-k", "final_flag or slo_at_target"))
    for name in ("test_streaming_answers_end_with_final_flag", "test_streaming_slo_at_target_load"):
        result = run.result(name)
        assert result["verdict"] == "not_applicable" and "no READY decoupled" in result["reason"]


def test_a_stream_soaks_report_judges_perf3_with_the_stream_soak_off(run_checklist, tmp_path):
    """A stream soak long enough to judge the leak (the leak-judging duration set to 3 s so that the
    test runs in seconds) stands as evidence for a run of the same deployment with the stream soak
    off: PERF-3 passes on it, citing it; the unary soak's evidence is not taken for it."""
    common = (*_own_server("generate", "--triton-threshold=soak_leak_min_duration_s=3"), "-k", "soak")
    nightly = run_checklist("test_streaming.py", url=None, args=common)
    soaked = nightly.result("test_streaming_soak_every_request_finishes")
    assert soaked["verdict"] == "pass", soaked["reason"]
    assert [m["value"] >= 4 for m in soaked["measurements"] if m["name"] == "soak duration run"] == [True]
    identity = json.loads(next(e["text"] for e in soaked["evidence"] if e["label"] == "soak server identity"))
    assert identity["soak_streams"] == {"generate": THRESHOLDS["streaming_concurrency"].default}
    assert "generate" in identity["models"]
    kept = tmp_path / "nightly.json"
    kept.write_text((nightly.report_dir / "readiness.json").read_text())

    release = run_checklist("test_streaming.py", url=None, args=(
        *common, "--triton-threshold=streaming_soak_s=0", f"--triton-soak-evidence={kept}"))
    result = release.result("test_streaming_soak_every_request_finishes")
    assert result["verdict"] == "pass", result["reason"]
    assert [j["rule"] for j in result["judgements"]] == ["soak-evidence"]
    assert result["reason"].startswith(f"PERF-3 is judged by the soak evidence {kept} alone: this run did not soak "
                                       "(streaming_soak_s = 0)")
