"""Soak evidence (PERF-3 in a release run judged by a nightly soak): reading a report or journal,
and every difference that refuses it. Pure unit tests; the identity itself (files, launch, rates)
is in tests/test_soak_identity.py, the server tests are in tests/test_soak.py."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from pytest_triton_ready.facts import Facts
from pytest_triton_ready.record.model import Result
from pytest_triton_ready.record.recorder import CheckRecorder
from pytest_triton_ready.settings import build_settings
from pytest_triton_ready.soak import soak_limits
from pytest_triton_ready.soak.evidence import EvidenceError, evidence_problems, judge_on_evidence, load_evidence, stand_in
from pytest_triton_ready.soak.identity import IDENTITY_FORMAT

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
LAUNCH = {"launcher": "embedded", "image": None, "arguments": ["tritonserver", "--log-verbose=0"]}
IDENTITY = {"identity_format": IDENTITY_FORMAT, "server_version": "2.51.0", "launch": LAUNCH,
            "models": {"scale": {"ready_versions": ["1"], "config_sha256": "a" * 64,
                                 "files": {"config.pbtxt": "sha256:" + "1" * 64, "1/model.py": "sha256:" + "2" * 64}},
                       "cached_sum": {"ready_versions": ["1"], "config_sha256": "b" * 64,
                                      "files": {"config.pbtxt": "sha256:" + "3" * 64}}},
            "soak_rates_infer_s": {"scale": 20.0, "cached_sum": 20.0}}


def _report(tmp_path, *, verdict="pass", ran_s=900.0, finished="2026-11-30T12:00:00+00:00", leak_judged=True,
            identity=IDENTITY):
    judgements = [{"rule": "success-overall", "passed": True}]
    if leak_judged:
        judgements.append({"rule": "server-memory-leak", "passed": True})
    document = {"kind": "triton-readiness", "finished_at": finished, "results": [{
        "check_id": "PERF-3", "nodeid": "checks/test_soak.py::test_soak_stability", "verdict": verdict,
        "judgements": judgements,
        "measurements": [{"name": "soak duration run", "value": ran_s, "unit": "s"}],
        "evidence": [{"label": "soak server identity", "text": json.dumps(identity)}]}]}
    path = tmp_path / "readiness.json"
    path.write_text(json.dumps(document))
    return path


def _judge(path, current=IDENTITY, **kw):
    return evidence_problems(load_evidence(path), current, max_age_h=kw.get("max_age_h", 168), leak_min_s=kw.get("leak_min_s", 600),
                 now=NOW)


def test_evidence_of_the_same_server_that_judged_the_leak_and_passed_is_accepted(tmp_path):
    path = _report(tmp_path)
    assert _judge(path) == []
    assert _judge(tmp_path) == []  # the report directory works too
    assert load_evidence(path).describe().startswith(f"{path} (PERF-3 PASS, a soak of 900 s finished")


def test_a_different_model_config_is_refused_naming_the_model(tmp_path):
    changed = json.loads(json.dumps(IDENTITY))
    changed["models"]["cached_sum"]["config_sha256"] = "c" * 64
    problems = _judge(_report(tmp_path), changed)
    assert problems == ["model cached_sum: its effective config differs (sha256 bbbbbbbbbbbb there, cccccccccccc here)"]


@pytest.mark.parametrize(("report", "current", "limits", "expected"), [
    ({"verdict": "fail"}, None, {}, "its PERF-3 verdict is FAIL, not PASS"),
    ({"ran_s": 60.0}, None, {}, "it soaked 60 s, less than soak_leak_min_duration_s = 600 s"),
    ({"leak_judged": False}, None, {}, "it did not judge the memory-leak rule"),
    ({"finished": "2026-11-20T12:00:00+00:00"}, None, {}, "it is 264.0 h old, older than soak_evidence_max_age_h = 168 h"),
    ({}, {**IDENTITY, "server_version": "2.52.0"}, {}, "server version 2.51.0 there, 2.52.0 here"),
    ({}, {**IDENTITY, "models": {**IDENTITY["models"], "scale": {**IDENTITY["models"]["scale"],
                                                                  "ready_versions": ["1", "2"]}}}, {},
     "model scale: READY versions ['1'] there, ['1', '2'] here"),
    ({}, {**IDENTITY, "models": {**IDENTITY["models"], "new": {"ready_versions": []}}}, {},
     "model new: held by this server, not in the evidence"),
    ({}, {**IDENTITY, "models": {"scale": IDENTITY["models"]["scale"]}}, {},
     "model cached_sum: in the evidence, not held by this server"),
    ({"finished": "2026-12-01T15:00:00+00:00"}, None, {},
     "its finish time 2026-12-01T15:00:00+00:00 is 3.0 h in the future (now 2026-12-01T12:00:00+00:00): a clock "
     "that is wrong there or here, so its age is unknown"),
])
def test_each_difference_refuses_the_evidence_and_is_named(tmp_path, report, current, limits, expected):
    assert _judge(_report(tmp_path, **report), current or IDENTITY, **limits) == [expected]


def test_unreadable_evidence_is_one_line_naming_the_file(tmp_path):
    with pytest.raises(EvidenceError, match=r"soak evidence .*missing.json: no such file"):
        load_evidence(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(EvidenceError, match=r"bad.json: not a readiness.json nor a soak journal"):
        load_evidence(tmp_path / "bad.json")
    (tmp_path / "nosoak.json").write_text(json.dumps({"results": [{"check_id": "PERF-1"}]}))
    with pytest.raises(EvidenceError, match=r"holds no PERF-3 soak \(test_soak_stability\) that recorded the server"):
        load_evidence(tmp_path / "nosoak.json")


def test_a_closed_soak_journal_is_evidence_too(tmp_path):
    from pytest_triton_ready.settings import build_settings
    from pytest_triton_ready.soak import JournalWriter, SoakWindow, build_plan

    settings = build_settings({"triton_soak": "30s"}, {}, environ={}, cli_thresholds=["soak_leak_min_duration_s=5"])
    plan = build_plan(settings, ["scale"], Facts())
    path = tmp_path / "soak-journal.jsonl"
    writer = JournalWriter(path, {"started_at": "2026-12-01T11:00:00+00:00", "plan": plan.to_dict(),
                                  "context": {}, "settings": settings.redacted(), "server_identity": IDENTITY})
    for i in range(30):  # 6,000 clean requests: enough to decide a success rate of 0.999
        writer.window(SoakWindow(index=i, start_s=i, end_s=i + 1, wall_time=1e9 + i, sent=200, ok=200, failed=0, errors={},
                             p50_ms=2.0, p99_ms=4.0, pending_requests=0, server_rss_bytes=500 * 2**20,
                             runner_rss_bytes=80 * 2**20))
    writer.end("completed", "2026-12-01T11:00:30+00:00")
    evidence = load_evidence(path)
    assert evidence.verdict == "pass" and evidence.leak_judged and evidence.identity == IDENTITY
    assert evidence_problems(evidence, IDENTITY, max_age_h=168, leak_min_s=5, now=NOW) == []
    assert evidence_problems(evidence, IDENTITY, max_age_h=168, leak_min_s=600, now=NOW) == [
        "it soaked 30 s, less than soak_leak_min_duration_s = 600 s"]


def test_a_future_finish_time_within_the_clock_skew_allowance_is_not_refused(tmp_path):
    assert _judge(_report(tmp_path, finished="2026-12-01T12:00:30+00:00")) == []


def test_evidence_of_the_identity_format_before_file_digests_is_refused_asking_for_a_new_soak(tmp_path):
    recorded_before = {"server_version": "2.51.0",  # what a soak of the previous version recorded
                       "models": {"scale": {"ready_versions": ["1"], "config_sha256": "a" * 64}}}
    assert _judge(_report(tmp_path, identity=recorded_before)) == [
        f"its server identity is format 1, this version of pytest-triton-ready compares format {IDENTITY_FORMAT} "
        "(every model's file digests, the launch arguments and image, the offered rate): re-soak with this "
        "version to make new evidence"]


def _recorder_and_limits(leak_min_s=600):
    settings = build_settings({"triton_soak": "0"}, {}, environ={},
                              cli_thresholds=[f"soak_leak_min_duration_s={leak_min_s}"])
    return CheckRecorder(Result("PERF-3", "performance", "soak", "n")), soak_limits(settings)


def test_with_the_soak_off_accepted_evidence_judges_perf3_citing_it_and_claims_no_latency_drift(tmp_path):
    check, limits = _recorder_and_limits()
    path = _report(tmp_path, finished=dt.datetime.now(dt.timezone.utc).isoformat())
    assert judge_on_evidence(check, path, IDENTITY, limits) is None
    judged = check.result.judgements
    assert [j.rule for j in judged] == ["soak-evidence"] and judged[0].passed
    assert "3 file digests, launch arguments (embedded server), and the soak rates of 2 models" in judged[0].measured
    assert str(path) in judged[0].measured
    assert check.result.reason.startswith(f"PERF-3 is judged by the soak evidence {path} alone: this run did not soak")
    assert "latency drift" in check.result.reason and "not claimed" in check.result.reason
    cited = next(e.text for e in check.result.evidence if e.label == "soak evidence")
    assert cited.startswith(f"{path} (PERF-3 PASS")


def test_with_the_soak_off_refused_evidence_says_why_and_judges_nothing(tmp_path):
    check, limits = _recorder_and_limits()
    path = _report(tmp_path, finished=dt.datetime.now(dt.timezone.utc).isoformat())
    slower = {**IDENTITY, "soak_rates_infer_s": {"scale": 50.0, "cached_sum": 20.0}}
    refused = judge_on_evidence(check, path, slower, limits)
    assert refused == (f"the soak is turned off (--triton-soak=0) and soak evidence {path} refused: model scale: "
                       "soaked at 20 infer/s there, below this run's planned soak rate of 50 infer/s")
    assert not check.result.judgements
    check, limits = _recorder_and_limits()
    assert judge_on_evidence(check, tmp_path / "gone.json", IDENTITY, limits).endswith("gone.json: no such file")


def test_evidence_standing_in_for_the_leak_rule_is_cited_once_accepted(tmp_path):
    check, limits = _recorder_and_limits()
    path = _report(tmp_path, finished=dt.datetime.now(dt.timezone.utc).isoformat())
    assert stand_in(check, path, IDENTITY, limits, ["the memory-leak rule was not judged"]) == []
    assert check.result.reason == f"the memory-leak rule is judged by the soak evidence {path}"
    assert stand_in(check, None, IDENTITY, limits, ["unjudged"]) == ["unjudged"]


STREAMS = {**IDENTITY, "soak_rates_infer_s": {}, "soak_streams": {"generate": 8, "other": 8}}


def _both_soaks(tmp_path, *, stream_ran=(900.0, 620.0), streams=STREAMS):
    """A nightly report holding the unary soak and a stream soak of two models (one run per model)."""
    document = json.loads(_report(tmp_path, finished=dt.datetime.now(dt.timezone.utc).isoformat()).read_text())
    document["results"].append({
        "check_id": "PERF-3", "nodeid": "checks/test_streaming.py::test_streaming_soak_every_request_finishes",
        "verdict": "pass", "judgements": [{"rule": "streaming-memory-leak", "passed": True}],
        "measurements": [{"name": "soak duration run", "value": v, "unit": "s", "model": m}
                         for v, m in zip(stream_ran, ("generate", "other"), strict=True)],
        "evidence": [{"label": "soak server identity", "text": json.dumps(streams)}]})
    path = tmp_path / "nightly.json"
    path.write_text(json.dumps(document))
    return path


def test_the_stream_soak_takes_the_stream_soaks_record_and_its_shortest_run(tmp_path):
    from pytest_triton_ready.soak.evidence import STREAM_SOAK

    evidence = load_evidence(_both_soaks(tmp_path), STREAM_SOAK)
    assert evidence.identity == STREAMS and evidence.ran_s == 620.0 and evidence.leak_judged
    assert load_evidence(_both_soaks(tmp_path)).identity == IDENTITY  # the unary soak's own record
    assert evidence_problems(evidence, STREAMS, max_age_h=168, leak_min_s=600) == []
    assert evidence_problems(evidence, STREAMS, max_age_h=168, leak_min_s=700) == [
        "it soaked 620 s, less than soak_leak_min_duration_s = 700 s"]
    harder = {**STREAMS, "soak_streams": {"generate": 16, "other": 8}}
    assert evidence_problems(evidence, harder, max_age_h=168, leak_min_s=600) == [
        "model generate: soaked at 8 streams there, below this run's planned soak rate of 16 streams"]
    with pytest.raises(EvidenceError, match=r"holds no PERF-3 soak \(test_streaming_soak_every_request_finishes\)"):
        load_evidence(_report(tmp_path), STREAM_SOAK)


def test_with_the_stream_soak_off_evidence_of_a_stream_soak_judges_perf3(tmp_path):
    from pytest_triton_ready.soak.streaming import stream_soak_off

    path = _both_soaks(tmp_path)
    settings = build_settings({"triton_soak_evidence": str(path)}, {}, environ={},
                              cli_thresholds=["soak_leak_min_duration_s=600"])
    check = CheckRecorder(Result("PERF-3", "performance", "stream soak", "n"))
    assert stream_soak_off(check, settings, STREAMS) is None
    assert [j.rule for j in check.result.judgements] == ["soak-evidence"]
    assert "this run did not soak (streaming_soak_s = 0)" in check.result.reason
    assert "stuck streams under steady load are not claimed" in check.result.reason
    unset = build_settings({}, {}, environ={})
    assert stream_soak_off(CheckRecorder(Result("PERF-3", "performance", "s", "n")), unset, STREAMS) == (
        "the stream soak is off (streaming_soak_s = 0) and no soak evidence (--triton-soak-evidence) stands in for it")
