"""Soak mode (PERF-3): the pure parts (durations, journal, trends, rules, plan, progress line), then
real soaks against real embedded servers: a healthy short soak passes, a leaking model is caught by
the leak rule, a model that starts failing 1% of requests fails the success rule in the right
window, Ctrl-C still writes journal and report, and a runner killed mid-soak leaves a journal
that renders."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CHECKS, TEST_REPOSITORIES
from pytest_triton_ready.facts import Capacity, Facts
from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY
from pytest_triton_ready.report import write_reports
from pytest_triton_ready.report.soak_journal import journal_to_run
from pytest_triton_ready.settings import build_settings
from pytest_triton_ready.soak import (
    JournalError,
    JournalWriter,
    PlanError,
    SoakWindow,
    build_plan,
    evaluate,
    is_journal,
    parse_duration,
    read_journal,
    soak_limits,
)
from pytest_triton_ready.soak.status_line import ProgressLine, progress_text
from pytest_triton_ready.soak.trend import fit

MB = 1024 * 1024
SOAK_FAULTS = TEST_REPOSITORIES / "soak_faults"


# -- pure parts ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, seconds", [("90s", 90), ("30m", 1800), ("24h", 86400), ("1h30m", 5400),
                                           ("60", 60), (2.5, 2.5), ("500ms", 0.5)])
def test_durations_read_as_people_write_them(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["ten minutes", "5x", "-3s", "1h banana"])
def test_a_bad_duration_is_one_readable_error(text):
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_a_bad_soak_duration_names_its_source():
    from pytest_triton_ready.settings import SettingsError

    with pytest.raises(SettingsError, match=r"--triton-soak from env:TRITON_READY_SOAK: .*'forever'"):
        build_settings({}, {}, environ={"TRITON_READY_SOAK": "forever"})


def _window(i: int, *, ok: int = 100, failed: int = 0, p99: float = 5.0, rss_mb: float | None = 500.0,
            host_mb: float | None = None, runner_mb: float = 80.0, pending: float = 0.0, width: float = 1.0,
            errors: dict | None = None) -> SoakWindow:
    return SoakWindow(index=i, start_s=i * width, end_s=(i + 1) * width, wall_time=1e9 + i, sent=ok + failed, ok=ok,
                  failed=failed, errors=errors or ({"boom": failed} if failed else {}), p50_ms=p99 / 2, p99_ms=p99,
                  pending_requests=pending, server_rss_bytes=None if rss_mb is None else rss_mb * MB,
                  host_memory_used_bytes=None if host_mb is None else host_mb * MB, runner_rss_bytes=runner_mb * MB)


def _limits(**overrides):
    """The soak's limits; these unit tests judge leaks on short synthetic runs unless told otherwise."""
    overrides = {"soak_leak_min_duration_s": 0, **overrides}
    settings = build_settings({}, {}, environ={}, cli_thresholds=[f"{k}={v}" for k, v in overrides.items()])
    return soak_limits(settings)


def _failed_rules(evaluation):
    return {o.rule for o in evaluation.failed}


def test_least_squares_slope_is_per_hour():
    trend = fit([(t, 100 + 2 * t) for t in range(0, 60, 5)])  # +2 per second
    assert trend.slope_per_hour == pytest.approx(7200)
    assert trend.r_squared == pytest.approx(1.0)
    assert fit([(0, 1), (1, None), (2, 3)]) is None  # two usable points make no trend


def test_flat_windows_pass_every_rule():
    windows = [_window(i, rss_mb=500 + (i % 2) * 0.5) for i in range(20)]
    evaluation = evaluate(windows, _limits(), warmup_s=1)
    assert not evaluation.failed
    slope = next(o for o in evaluation.outcomes if o.name == "server process tree RSS slope")
    assert abs(slope.value) < 1000  # noise of half a MB, well below the 32 MB growth floor
    assert any(o.rule == "server-memory-leak" and o.name.endswith("fitted growth") and o.passed for o in evaluation.outcomes)


def test_memory_growth_in_a_soak_too_short_to_judge_is_a_warning():
    windows = [_window(i, rss_mb=500 + 10 * i) for i in range(20)]  # 10 MB per 1 s window
    evaluation = evaluate(windows, _limits(soak_leak_min_duration_s=600), 1)
    assert "server-memory-leak" not in _failed_rules(evaluation)
    warned = [o for o in evaluation.outcomes if o.rule == "server-memory-leak" and o.severity == "warning"]
    assert warned and warned[-1].passed is False  # still measured and shown, but it does not fail the soak
    assert any("too short to tell a leak from warm-up" in n for n in evaluation.notes)


def test_a_soak_shorter_than_the_leak_duration_has_not_judged_the_leak_rule_and_says_what_it_needs():
    windows = [_window(i, rss_mb=500) for i in range(20)]  # flat memory, 19 s after warm-up
    unjudged = evaluate(windows, _limits(soak_leak_min_duration_s=600), 1).unjudged
    assert len(unjudged) == 1
    assert "memory-leak rule (server-memory-leak, gpu-memory-leak) was not judged" in unjudged[0]
    assert "soak_leak_min_duration_s = 600 s" in unjudged[0] and "--triton-soak=601s" in unjudged[0]
    assert evaluate(windows, _limits(soak_leak_min_duration_s=10), 1).unjudged == []


def test_memory_growing_every_window_is_a_leak_with_its_slope():
    windows = [_window(i, rss_mb=500 + 10 * i) for i in range(20)]  # 10 MB per 1 s window
    evaluation = evaluate(windows, _limits(), warmup_s=1)
    leak = next(o for o in evaluation.failed if o.rule == "server-memory-leak")
    assert leak.value == pytest.approx(36000, rel=1e-6)  # MB/hour
    assert "grew 36000.0 MB/hour" in leak.finding


def test_host_memory_judges_only_when_the_server_rss_is_unknown():
    owned = [_window(i, host_mb=1000 + 10 * i, rss_mb=500) for i in range(20)]
    attached = [_window(i, host_mb=1000 + 10 * i, rss_mb=None) for i in range(20)]
    assert "host-memory-leak" not in _failed_rules(evaluate(owned, _limits(), 1))
    assert "host-memory-leak" in _failed_rules(evaluate(attached, _limits(), 1))


def test_a_long_soak_that_read_no_server_memory_has_not_judged_leaks():
    unread = [_window(i, rss_mb=None, host_mb=None) for i in range(20)]
    evaluation = evaluate(unread, _limits(), 1)
    assert not evaluation.failed
    assert len(evaluation.unjudged) == 1 and evaluation.unjudged[0].startswith("server memory was not read")
    assert "server host used memory (nv_cpu_memory_used_bytes): not read" in evaluation.unjudged[0]
    short = evaluate(unread, _limits(soak_leak_min_duration_s=600), 1).unjudged
    assert len(short) == 1 and short[0].startswith("the memory-leak rule")  # too short, whatever was read
    host_only = [_window(i, rss_mb=None, host_mb=1000) for i in range(20)]
    assert evaluate(host_only, _limits(), 1).unjudged == []


def test_the_soak_records_its_plan_as_settings_and_judges_its_rules():
    from pytest_triton_ready.record.model import Result
    from pytest_triton_ready.record.recorder import CheckRecorder
    from pytest_triton_ready.soak import record_soak

    settings = build_settings({"triton_soak": "20s"}, {}, environ={}, cli_thresholds=["soak_leak_min_duration_s=5"])
    plan = build_plan(settings, ["m"], Facts())
    check = CheckRecorder(Result("PERF-3", "performance", "soak", "n"))
    record_soak(check, plan, [_window(i) for i in range(20)], 20.0)
    measured = {m.name for m in check.result.measurements}
    configured = {s.name for s in check.result.settings}
    assert {"soak duration planned", "window length", "target rate"} <= configured
    assert not configured & measured and "soak duration run" in measured
    judged = {j.rule for j in check.result.judgements}
    assert {"success-overall", "success-window", "server-memory-leak"} <= judged
    assert all(j.passed for j in check.result.judgements)


def _concluded(outcome_kwargs: dict, *, soak: str = "20s", leak_min_s: int = 5, gpu_reason: str | None = None,
               gpu_models: tuple[str, ...] = (), evidence: str | None = None):
    """A check after `conclude` on a soak of 20 flat 1 s windows of 200 clean requests (4,000 decide a success rate
    of 0.999 at 95%); the reason it ended early, if any."""
    from pytest_triton_ready.record.model import Result
    from pytest_triton_ready.record.recorder import CheckRecorder
    from pytest_triton_ready.soak.conclusion import conclude
    from pytest_triton_ready.soak.runner import SoakOutcome

    settings = build_settings({"triton_soak": soak}, {}, environ={},
                              cli_thresholds=[f"soak_leak_min_duration_s={leak_min_s}"])
    plan = build_plan(settings, ["m"], Facts())
    check = CheckRecorder(Result("PERF-3", "performance", "soak", "n"))
    outcome = SoakOutcome(**{"windows": [_window(i, ok=200) for i in range(20)], "ran_s": 20.0, "end_reason": "completed",
                             **outcome_kwargs})
    try:
        conclude(check, plan, outcome, {"models": {}}, evidence, gpu_reason, lambda: list(gpu_models))
    except pytest.skip.Exception:
        return check, check.result.reason
    return check, None


def test_a_completed_soak_that_judged_every_rule_concludes_without_ending_early():
    check, ended = _concluded({})
    assert ended is None and not check.failed and check.judged


def test_an_interrupted_or_broken_soak_is_incomplete_saying_how_far_it_ran():
    _, ended = _concluded({"end_reason": "interrupted", "ran_s": 12.0})
    assert ended.startswith("the soak was interrupted after 0:12 of 0:20; its 20 windows are kept (journal ")
    _, ended = _concluded({"end_reason": "error", "error": "engine died"})
    assert ended == "the soak broke off after 0:20 of 0:20: engine died"


def test_unreadable_gpu_memory_is_incomplete_only_for_models_on_gpus():
    _, ended = _concluded({}, gpu_reason="no NVML", gpu_models=("m",))
    assert ended == "models run on GPUs but GPU memory could not be read: no NVML"
    assert _concluded({}, gpu_reason="no NVML")[1] is None


def test_an_unjudged_leak_rule_without_evidence_is_incomplete_and_bad_evidence_says_why(tmp_path):
    _, ended = _concluded({}, leak_min_s=600)
    assert ended.startswith("the memory-leak rule (server-memory-leak, gpu-memory-leak) was not judged")
    _, ended = _concluded({}, leak_min_s=600, evidence=str(tmp_path / "missing.json"))
    assert "missing.json" in ended.split(";", 1)[1]


def test_no_soak_runs_when_it_is_off_or_has_no_model():
    from pytest_triton_ready.soak.conclusion import skipped_reason

    assert skipped_reason(0, ["m"]) == ("the soak is turned off (--triton-soak=0) and no soak evidence "
                                        "(--triton-soak-evidence) stands in for it")
    assert skipped_reason(0, ["m"], "nightly/readiness.json") is None  # the evidence judges PERF-3
    assert skipped_reason(60, []) == "no READY model in scope to soak"
    assert skipped_reason(60, ["m"]) is None


def test_one_failing_window_fails_the_success_rule_and_is_named():
    windows = [_window(i) for i in range(10)]
    windows[6] = _window(6, ok=99, failed=1, errors={"Stub process 'm_0' is not healthy.": 1})
    evaluation = evaluate(windows, _limits(), warmup_s=1)
    assert _failed_rules(evaluation) == {"success-window"}  # 1 in 1000 overall is exactly 99.9%: overall passes
    worst = next(o for o in evaluation.failed if o.name == "lowest window success rate")
    assert worst.window == 6
    assert worst.finding.startswith("window 6 (0:06-0:07): 1 of 100 requests failed")
    assert "Stub process" in worst.finding


def test_p99_drift_while_the_runner_fell_behind_is_undecided_not_a_failure():
    from pytest_triton_ready.load.client_health import guard_soak

    rising = [_window(i, p99=5 + i) for i in range(20)]
    rising[18].late_sends, rising[18].loop_lag_max_ms = 88, 40.0  # 88 of 100 scheduled went out late
    evaluation = guard_soak(evaluate(rising, _limits(), 1), rising, _limits())
    assert "p99-drift" not in _failed_rules(evaluation)
    assert evaluation.undecided[-1] == ("p99 drift: the load generator fell behind (88 late sends in window 18, "
                                        "loop lag 40 ms): run the client on its own cores or lower the rate")
    healthy = [_window(i, p99=5 + i) for i in range(20)]
    healthy[18].late_sends = 2  # a few late sends are noise: the drift is the server's
    assert "p99-drift" in _failed_rules(guard_soak(evaluate(healthy, _limits(), 1), healthy, _limits()))
    assert SoakWindow.from_dict(json.loads(json.dumps(rising[18].to_dict()))).late_sends == 88  # journaled


def test_p99_drift_compares_last_quarter_with_first_and_ignores_small_rises():
    rising = [_window(i, p99=5 + i) for i in range(20)]  # 6 ms -> 24 ms
    assert "p99-drift" in _failed_rules(evaluate(rising, _limits(), 1))
    small = [_window(i, p99=1 + i * 0.1) for i in range(20)]  # ratio 2.7, but under 3 ms of rise
    assert "p99-drift" not in _failed_rules(evaluate(small, _limits(), 1))


def test_growing_pending_requests_fail():
    windows = [_window(i, pending=2 * i) for i in range(20)]
    assert "pending-growth" in _failed_rules(evaluate(windows, _limits(), 1))


def test_gpu_readings_of_an_h200_capture_feed_the_gpu_leak_rule():
    """Three scrapes of a real H200 server (idle, under load, after), read through the soak's sampler
    and server/gpu.py as three windows a minute apart: GPU memory rose 3143 -> 3535 MiB, a leak at that pace."""
    from pytest_triton_ready.server.gpu import GpuReader
    from pytest_triton_ready.server.metrics import MetricsSnapshot
    from pytest_triton_ready.soak.sampler import Sampler

    captures = Path("/work/shared/data/h200-triton-2.51")
    if not captures.is_dir():
        pytest.skip("the H200 metrics captures are not on this machine")
    texts = iter((captures / f"metrics_{name}.txt").read_text() for name in ("idle", "load", "after")
                 for _ in range(2))  # one scrape for the sampler, one for the GPU reader
    scrape = lambda: MetricsSnapshot.parse(next(texts))  # noqa: E731
    sampler = Sampler(scrape, ["mlp"], lambda: None, GpuReader(scrape, same_host=False))
    windows = []
    for i in range(3):
        reading = sampler.read()
        windows.append(SoakWindow(index=i, start_s=60.0 * i, end_s=60.0 * (i + 1), wall_time=1e9 + 60 * i, sent=100, ok=100,
                              pending_requests=reading.pending_requests, gpu_memory_used_bytes=reading.gpu_memory_used_bytes,
                              gpu_utilization=reading.gpu_utilization, host_memory_used_bytes=reading.host_memory_used_bytes,
                              runner_rss_bytes=reading.runner_rss_bytes))
    assert [w.gpu_memory_used_bytes for w in windows] == [3295674368, 3501195264, 3706716160]
    assert [w.gpu_utilization for w in windows] == [0, 0.44, 0.61]
    assert [w.pending_requests for w in windows] == [0, 3, 0]
    evaluation = evaluate(windows, _limits(), warmup_s=0)
    gpu = next(o for o in evaluation.failed if o.rule == "gpu-memory-leak")
    assert gpu.value == pytest.approx(196.0 * 60, rel=0.01)  # 196 MiB a minute, in MB/hour
    assert "host-memory-leak" in _failed_rules(evaluation)  # no server RSS here: the host gauge judges


def test_limits_come_from_the_yaml_soak_section_unless_thresholds_override(tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text("soak:\n  window: 2s\n  rate: 7\n  server_memory_slope_max_mb_h: 5\n  p99_drift_ratio_max: 3\n"
                      "thresholds:\n  soak_p99_drift_ratio_max: 2\n")
    settings = build_settings({"triton_soak": "1m"}, {}, environ={}, config_file=str(config))
    limits = soak_limits(settings)
    assert limits["soak_server_memory_slope_max_mb_h"].value == 5
    assert limits["soak_server_memory_slope_max_mb_h"].source.endswith("soak.server_memory_slope_max_mb_h")
    assert limits["soak_p99_drift_ratio_max"].value == 2 and limits["soak_p99_drift_ratio_max"].source.startswith("yaml:")
    facts = Facts()
    facts.publish(Capacity("a", max_throughput_within_slo_infer_s=400.0, p99_ms=10.0, concurrency=4, instances=1))
    plan = build_plan(settings, ["a", "b"], facts)
    assert plan.duration_s == 60 and plan.window_s == 2
    assert plan.rates == {"a": 100.0, "b": 7.0}  # 0.5 x 400 infer/s, shared by the 2 models soaked together
    assert "PERF-2" in plan.rate_sources["a"] and "/ 2 models soaked together" in plan.rate_sources["a"]
    assert plan.rate_sources["b"] == "yaml soak.rate"


def test_the_soak_rate_is_a_fraction_of_the_capacitys_lower_bound_so_runs_inside_its_noise_soak_alike():
    """Two runs whose PERF-2 capacities differ by 30% inside their intervals (7,470 and 11,154
    infer/s, both with a 95% low end near 7,000) soaked at 0.5 x the value: at different loads."""
    settings = build_settings({"triton_soak": "1m"}, {}, environ={})
    rates = []
    for value, low in ((7470.0, 7010.0), (11154.0, 7050.0)):
        facts = Facts()
        facts.publish(Capacity("m", max_throughput_within_slo_infer_s=value, p99_ms=10.0, concurrency=16, instances=1,
                               throughput_low_infer_s=low, level=0.95))
        plan = build_plan(settings, ["m"], facts)
        rates.append(plan.rates["m"])
        assert plan.rate_sources["m"].startswith(f"0.5 x {low:.1f} infer/s, the low end of the 95% interval of the "
                                                 "highest throughput within SLO that PERF-2 measured in this run")
    assert rates == [3505.0, 3525.0]


def test_default_plan_states_its_conservative_rate():
    plan = build_plan(build_settings({}, {}, environ={}), ["m"], Facts())
    assert plan.duration_s == 60 and plan.window_s == 3 and plan.rates == {"m": 10.0}
    assert "conservative default" in plan.rate_sources["m"]
    settings = build_settings({"triton_soak": "10s"}, {}, environ={})
    settings.yaml = {"soak": {"window": "30s"}}
    with pytest.raises(PlanError, match=r"soak.window in the YAML file \(30 s\) is longer than the soak \(10 s\)"):
        build_plan(settings, ["m"], Facts())
    settings = build_settings({"triton_soak": "24h"}, {}, environ={})
    settings.yaml = {"soak": {"window": "1s"}}
    with pytest.raises(PlanError, match="more than 10000 windows; use at least 8.64 s"):
        build_plan(settings, ["m"], Facts())


def test_journal_survives_a_torn_last_line(tmp_path):
    path = tmp_path / "j.jsonl"
    plan = build_plan(build_settings({"triton_soak": "10s"}, {}, environ={}), ["m"], Facts())
    writer = JournalWriter(path, {"plan": plan.to_dict(), "context": {}, "settings": {}})
    for i in range(3):
        writer.window(_window(i))
    writer.close()
    with open(path, "a") as handle:
        handle.write('{"kind":"window","index":3,"sta')  # the runner died mid-write
    assert is_journal(path)
    journal = read_journal(path)
    assert [w.index for w in journal.windows] == [0, 1, 2]
    assert journal.damaged_lines == [5] and not journal.finished
    (tmp_path / "not.jsonl").write_text('{"schema_version": "1.0"}\n')
    assert not is_journal(tmp_path / "not.jsonl")
    with pytest.raises(JournalError, match="not a soak journal"):
        read_journal(tmp_path / "not.jsonl")


def test_a_completed_journal_renders_with_the_rules_verdict(tmp_path):
    settings = build_settings({"triton_soak": "10s"}, {}, environ={})
    plan = build_plan(settings, ["m"], Facts())
    path = tmp_path / "j.jsonl"
    writer = JournalWriter(path, {"started_at": "2026-11-30T00:00:00+00:00", "plan": plan.to_dict(),
                                  "context": {"launcher": "attach"}, "settings": settings.redacted()})
    for i in range(10):
        writer.window(_window(i, failed=2 if i == 7 else 0))
    writer.end("completed", "2026-11-30T00:00:10+00:00")
    run = journal_to_run(path)
    result = run.results[0]
    assert result.check_id == "PERF-3" and result.verdict.value == "fail" and result.reason is None
    assert any(f.message.startswith("window 7 (0:07-0:08): 2 of 102 requests failed") for f in result.findings)
    assert run.finished_at == "2026-11-30T00:00:10+00:00" and run.context["soak_journal"]["closed"] is True
    document = json.loads(write_reports(run, tmp_path / "out")["json"].read_text())
    assert document["verdict"] == "NOT READY"


def test_a_completed_journal_without_server_memory_renders_incomplete(tmp_path):
    settings = build_settings({"triton_soak": "10s"}, {}, environ={}, cli_thresholds=["soak_leak_min_duration_s=5"])
    plan = build_plan(settings, ["m"], Facts())
    path = tmp_path / "j.jsonl"
    writer = JournalWriter(path, {"started_at": "2026-11-30T00:00:00+00:00", "plan": plan.to_dict(),
                                  "context": {"launcher": "attach"}, "settings": settings.redacted()})
    for i in range(10):
        writer.window(_window(i, rss_mb=None))
    writer.end("completed", "2026-11-30T00:00:10+00:00")
    result = journal_to_run(path).results[0]
    assert result.verdict.value == "incomplete" and result.reason.startswith("server memory was not read")


def test_progress_line_rewrites_on_a_tty_and_prints_a_line_per_window_otherwise():
    window = _window(2, ok=150, host_mb=3000)
    text = progress_text(3.0, 600.0, window, errors_total=1, completed_total=450)
    assert text.startswith("PERF-3 soak 0:03/10:00 (9:57 left) | 150.0 req/s | p99 5.0 ms | errors 1 (0.222%)")
    assert "server 500 MB host 3000 MB runner 80 MB" in text
    written: list[str] = []
    tty = ProgressLine(write=written.append, tty=True)
    tty.show("a")
    tty.show("b")
    tty.close()
    assert written == ["\ra", "\rb", "\n"]
    written.clear()
    plain = ProgressLine(write=written.append, tty=False)
    plain.show("a")
    plain.close()
    assert written == ["a\n"]


# -- real soaks ---------------------------------------------------------------------------------------
# Soaks of a few seconds for the server tests: 60 infer/s a model for 3 s or more, at a success
# minimum of 0.97, which 121 clean requests decide (0.999 needs 3,688); the drift floor raised so
# that latency swings of this shared machine's other jobs are not read as the server's drift.
SHORT_SOAK = {"window": "1s", "rate": 60, "success_rate_min": 0.97, "p99_drift_min_ms": 200}


def _soak_config(tmp_path: Path, **soak) -> str:
    path = tmp_path / "soak.yaml"
    path.write_text("soak:\n" + "".join(f"  {k}: {v}\n" for k, v in soak.items()))
    return f"--triton-config={path}"


def _measurement(result: dict, name: str) -> dict:
    return next(m for m in result["measurements"] if m["name"] == name)


def test_short_soak_of_the_demo_server_passes(run_checklist, tmp_path):
    # The leak rule is judged even on 8 s, so that its passing case is exercised on a real server.
    run = run_checklist("test_soak.py", url=None, args=(
        "--triton-launch=embedded", "--triton-soak=8s", "--triton-models=scale,cached_sum",
        "--triton-threshold=soak_leak_min_duration_s=1",
        _soak_config(tmp_path, **SHORT_SOAK)), subprocess=True)
    run.outcome.assert_outcomes(passed=1)
    lines = run.outcome.outlines
    first = next(i for i, line in enumerate(lines) if line.startswith("PERF-3 soak "))
    # once the soak's own line shows, the generic progress line of a long check stays away
    assert not any(line.startswith("  PERF-3 test_soak_stability ... ") for line in lines[first:]), lines
    result = run.result("test_soak_stability")
    assert result["verdict"] == "pass" and run.report["verdict"] == "READY"
    assert _measurement(result, "windows")["value"] == 8
    assert _measurement(result, "success rate over the soak")["value"] == 1.0
    assert _measurement(result, "requests succeeded")["value"] > 200
    rss = _measurement(result, "server process tree RSS fitted growth")
    assert rss["passed"] is True and rss["threshold"] == 32.0
    assert {c["title"] for c in result["charts"]} >= {"Soak: latency per window", "Soak: memory per window"}
    journal = read_journal(run.report_dir / "soak-journal.jsonl")
    assert journal.finished and journal.end["reason"] == "completed" and len(journal.windows) == 8
    assert all(w.server_rss_bytes and w.runner_rss_bytes and w.p99_ms for w in journal.windows)
    # the runner's own health, journaled per window (load/client_health.py)
    assert all(w.loop_lag_max_ms is not None and w.runner_cpu_s and w.late_sends >= 0 for w in journal.windows)


def test_an_attached_soak_that_cannot_read_server_memory_is_incomplete(run_checklist, demo_server, tmp_path):
    """Found attached to a fleet behind nginx whose metrics port was not reachable: the soak passed
    with 'not read' notes. A leak that was never measured is not a pass."""
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    endpoints = demo_server.endpoints
    run = run_checklist("test_soak.py", url=None, args=(
        f"--triton-url={endpoints.http_url}", f"--triton-grpc-url={endpoints.grpc_url}",
        f"--triton-metrics-url=http://127.0.0.1:{closed_port}/metrics",
        "--triton-soak=4s", "--triton-models=scale", "--triton-threshold=soak_leak_min_duration_s=1",
        _soak_config(tmp_path, **{**SHORT_SOAK, "rate": 40})))  # under the attach ceiling of 50 requests/s
    result = run.result("test_soak_stability")
    assert result["verdict"] == "incomplete", result
    assert result["reason"].startswith("server memory was not read"), result["reason"]
    assert "--triton-metrics-url" in result["reason"] and run.report["verdict"] == "INCOMPLETE"


def test_a_model_leaking_on_every_request_is_caught_by_the_leak_rule(run_checklist, tmp_path):
    run = run_checklist("test_soak.py", url=None, args=(
        "--triton-launch=embedded", f"--triton-model-repository={SOAK_FAULTS}", "--triton-models=leaky",
        "--triton-soak=8s", "--triton-threshold=soak_leak_min_duration_s=1",
        _soak_config(tmp_path, window="1s", rate=40)), subprocess=True)
    run.outcome.assert_outcomes(failed=1)
    result = run.result("test_soak_stability")
    assert result["verdict"] == "fail"
    slope = _measurement(result, "server process tree RSS slope")
    assert slope["passed"] is False and slope["value"] > 10_000  # 256 KiB x 40/s is about 36,000 MB/h
    assert slope["threshold"] == 20.0 and slope["unit"] == "MB/h"
    assert _measurement(result, "success rate over the soak")["passed"] is True
    leak = [f for f in result["findings"] if f["rule"] == "server-memory-leak"]
    assert leak and "server process tree RSS grew" in leak[0]["message"]
    assert "server-memory-leak" not in {f["rule"] for f in result["findings"] if f["severity"] != "error"}


def test_a_model_that_starts_failing_fails_the_success_rule_in_the_right_window(run_checklist, tmp_path):
    healthy_s = 4.0  # tests/repositories/soak_faults/flaky/config.pbtxt
    run = run_checklist("test_soak.py", url=None, args=(
        "--triton-launch=embedded", f"--triton-model-repository={SOAK_FAULTS}", "--triton-models=flaky",
        "--triton-soak=10s", _soak_config(tmp_path, window="1s", rate=100)), subprocess=True)
    run.outcome.assert_outcomes(failed=1)
    result = run.result("test_soak_stability")
    journal = read_journal(run.report_dir / "soak-journal.jsonl")
    failing = [w for w in journal.windows if w.failed]
    assert failing, "the flaky model never failed"
    assert all(w.failed == 0 for w in journal.windows if w.end_s <= healthy_s - 0.5)
    first = failing[0]
    assert healthy_s - 1 <= first.start_s <= healthy_s + 2, [(w.index, w.failed) for w in journal.windows]
    assert "injected failure" in next(iter(first.errors))
    rate = _measurement(result, "success rate over the soak")
    assert rate["passed"] is False and 0.98 < rate["value"] < 0.999
    window_findings = [f["message"] for f in result["findings"] if f["rule"] == "success-window"]
    assert any(m.startswith(f"window {first.index} (") for m in window_findings), window_findings


def _soak_in_subprocess(tmp_path: Path, demo_server, soak: str = "60s") -> tuple[subprocess.Popen, Path]:
    endpoints = demo_server.endpoints
    report = tmp_path / "report"
    command = [sys.executable, "-m", "pytest", str(CHECKS / "test_soak.py"), "-p", "no:cacheprovider",
               f"--triton-url={endpoints.http_url}", f"--triton-grpc-url={endpoints.grpc_url}",
               f"--triton-metrics-url={endpoints.metrics_url}", "--triton-models=scale", f"--triton-soak={soak}",
               _soak_config(tmp_path, window="1s", rate=20), f"--readiness-report={report}"]
    log = open(tmp_path / "runner.log", "wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True)
    return process, report


def _wait_for_windows(journal: Path, count: int, process: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count('"kind":"window"') >= count:
            return
        assert process.poll() is None, f"the soak runner exited early with {process.returncode}"
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} windows in {journal} after {timeout_s} s")


def test_ctrl_c_ends_the_soak_cleanly_and_still_writes_journal_and_report(tmp_path, demo_server):
    process, report = _soak_in_subprocess(tmp_path, demo_server)
    try:
        _wait_for_windows(report / "soak-journal.jsonl", 3, process)
        os.kill(process.pid, signal.SIGINT)
        assert process.wait(timeout=60) != 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    journal = read_journal(report / "soak-journal.jsonl")
    assert journal.end["reason"] == "interrupted" and len(journal.windows) >= 3
    document = json.loads((report / "readiness.json").read_text())
    assert document["verdict"] == "INCOMPLETE"
    result = document["results"][0]
    assert result["check_id"] == "PERF-3" and result["verdict"] == "incomplete"
    assert result["reason"].startswith("the soak was interrupted after")
    assert next(m for m in result["measurements"] if m["name"] == "windows")["value"] == len(journal.windows)


def test_a_runner_killed_mid_soak_leaves_a_journal_that_renders(tmp_path, demo_server):
    process, report = _soak_in_subprocess(tmp_path, demo_server)
    journal_path = report / "soak-journal.jsonl"
    try:
        _wait_for_windows(journal_path, 3, process)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert not (report / "readiness.json").exists()  # the runner never got to write a report
    kept = journal_path.read_text().count('"kind":"window"')
    run = journal_to_run(journal_path)
    written = write_reports(run, tmp_path / "rendered")
    document = json.loads(written["json"].read_text())
    assert document["verdict"] == "INCOMPLETE"
    result = document["results"][0]
    assert result["verdict"] == "incomplete"
    assert "stopped without closing its journal" in result["reason"] and f"{kept} windows kept" in result["reason"]
    assert next(m for m in result["measurements"] if m["name"] == "windows")["value"] == kept
    latency = next(c for c in result["charts"] if c["title"] == "Soak: latency per window")
    assert len(next(s for s in latency["series"] if s["name"] == "p99")["points"]) == kept
    assert document["context"]["soak_journal"]["closed"] is False
    assert document["context"]["server"]["version"].startswith("2.")


def test_the_report_command_renders_an_unclosed_journal(tmp_path):
    """`triton-ready report JOURNAL`: the report package's reader list gains the soak journal."""
    settings = build_settings({"triton_soak": "1m"}, {}, environ={})
    plan = build_plan(settings, ["m"], Facts())
    journal = tmp_path / "soak-journal.jsonl"
    writer = JournalWriter(journal, {"started_at": "2026-11-30T00:00:00+00:00", "plan": plan.to_dict(),
                                     "context": {"launcher": "attach", "runner": {"pytest_triton_ready": "0", "python": "3"}},
                                     "settings": settings.redacted()})
    for i in range(6):
        writer.window(_window(i, width=3.0))
    writer.close()  # no end line: the runner died
    done = subprocess.run([sys.executable, "-m", "pytest_triton_ready.cli", "report", str(journal),
                           f"--out={tmp_path / 'out'}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "verdict: INCOMPLETE" in done.stdout and "read as soak journal" in done.stdout
    html = (tmp_path / "out" / "soak-journal.html").read_text()
    assert "PERF-3" in html and "6 windows kept" in html


def test_a_journal_that_cannot_be_written_is_one_readable_line(run_checklist, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    config = tmp_path / "soak.yaml"
    config.write_text(f"soak:\n  window: 1s\n  journal: {blocker}/soak-journal.jsonl\n")
    run = run_checklist("test_soak.py", url="own", args=("--triton-soak=2s", "--triton-models=scale", f"--triton-config={config}"),
                        subprocess=True)
    run.outcome.assert_outcomes(failed=1)
    run.outcome.stdout.fnmatch_lines(
        [f"*triton-ready: cannot write the soak journal {blocker}/soak-journal.jsonl: {blocker} is not a directory"])
    assert "Traceback" not in run.outcome.stdout.str()


def test_a_short_soaks_report_stands_as_evidence_for_the_same_server_and_is_refused_for_another_config(
        run_checklist, pytester, tmp_path):
    """The nightly-evidence path: a soak long enough to judge leaks (the leak-judging duration set
    to 4 s so that the test runs in seconds) is accepted by a second, shorter run of the same demo
    server, and the same evidence with one model's config changed is refused naming that model."""
    common = ("--triton-launch=embedded", "--triton-models=scale,cached_sum",
              "--triton-threshold=soak_leak_min_duration_s=4",
              _soak_config(tmp_path, **SHORT_SOAK))
    nightly = run_checklist("test_soak.py", url=None, args=("--triton-soak=8s", *common))
    evidence = nightly.result("test_soak_stability")
    assert evidence["verdict"] == "pass", evidence["reason"]
    kept = tmp_path / "nightly.json"
    kept.write_text((nightly.report_dir / "readiness.json").read_text())

    release = run_checklist("test_soak.py", url=None, args=("--triton-soak=3s", f"--triton-soak-evidence={kept}",
                                                            *common))
    result = release.result("test_soak_stability")
    assert result["verdict"] == "pass", result["reason"]
    assert any(j["rule"] == "soak-evidence" and j["passed"] for j in result["judgements"])
    cited = next(e["text"] for e in result["evidence"] if e["label"] == "soak evidence")
    assert cited.startswith(f"{kept} (PERF-3 PASS") and str(kept) in result["reason"]
    assert f'href="{kept}"' in (release.report_dir / "readiness.html").read_text()

    document = json.loads(kept.read_text())
    soak = next(r for r in document["results"] if r["check_id"] == "PERF-3")
    entry = next(e for e in soak["evidence"] if e["label"] == "soak server identity")
    identity = json.loads(entry["text"])
    identity["models"]["cached_sum"]["config_sha256"] = "0" * 64  # another config of cached_sum
    entry["text"] = json.dumps(identity)
    other = tmp_path / "other-config.json"
    other.write_text(json.dumps(document))
    refused = run_checklist("test_soak.py", url=None, args=("--triton-soak=3s", f"--triton-soak-evidence={other}",
                                                            *common)).result("test_soak_stability")
    assert refused["verdict"] == "incomplete"
    assert f"soak evidence {other} refused: model cached_sum: its effective config differs" in refused["reason"]
    assert "scale" not in refused["reason"].split("refused:")[1]


def test_with_the_soak_off_evidence_of_this_deployment_passes_perf3_and_a_changed_model_py_is_refused(
        run_checklist, tmp_path):
    """`--triton-soak=0` with a nightly soak of this very deployment passes PERF-3 on that evidence
    alone, citing it; once scale's model.py changes under the same version and config, the same
    evidence is refused naming the file. The identity covers every model the server holds."""
    repository = tmp_path / "models"
    shutil.copytree(DEMO_REPOSITORY, repository, ignore=shutil.ignore_patterns("__pycache__"))
    common = ("--triton-launch=embedded", f"--triton-model-repository={repository}", "--triton-models=scale",
              "--triton-threshold=soak_leak_min_duration_s=4",
              _soak_config(tmp_path, **SHORT_SOAK))
    nightly = run_checklist("test_soak.py", url=None, args=("--triton-soak=8s", *common))
    soaked = nightly.result("test_soak_stability")
    assert soaked["verdict"] == "pass", soaked["reason"]
    identity = json.loads(next(e["text"] for e in soaked["evidence"] if e["label"] == "soak server identity"))
    assert set(identity["models"]) == {"accumulate", "cached_sum", "scale"}  # the whole server, not the scope
    assert set(identity["models"]["scale"]["files"]) == {"config.pbtxt", "1/model.py"}
    assert identity["soak_rates_infer_s"] == {"scale": 60.0} and identity["launch"]["launcher"] == "embedded"
    kept = tmp_path / "nightly.json"
    kept.write_text((nightly.report_dir / "readiness.json").read_text())

    release = run_checklist("test_soak.py", url=None, args=("--triton-soak=0", f"--triton-soak-evidence={kept}",
                                                            *common)).result("test_soak_stability")
    assert release["verdict"] == "pass", release["reason"]
    assert [j["rule"] for j in release["judgements"]] == ["soak-evidence"]
    assert release["reason"].startswith(f"PERF-3 is judged by the soak evidence {kept} alone")
    assert "latency drift" in release["reason"] and "not claimed" in release["reason"]

    with open(repository / "scale" / "1" / "model.py", "a") as handle:
        handle.write("# another model.py under the same version number\n")
    refused = run_checklist("test_soak.py", url=None, args=("--triton-soak=0", f"--triton-soak-evidence={kept}",
                                                            *common)).result("test_soak_stability")
    assert refused["verdict"] == "incomplete"
    differences = refused["reason"].split(f"soak evidence {kept} refused: ", 1)[1]
    assert differences.startswith("model scale: file 1/model.py changed (digest sha256:"), refused["reason"]
    assert ";" not in differences  # nothing else differs: same config, versions, launch and rate


def test_a_flat_p99_while_the_runner_sent_late_is_undecided_not_a_pass():
    """Latency counts from the send: a soak whose runner sent 88 of 100 requests late in a window
    did not give the server the rate planned, so a flat p99 says nothing of it."""
    from pytest_triton_ready.load.client_health import guard_soak

    flat = [_window(i, p99=5) for i in range(20)]
    assert "p99-drift" not in _failed_rules(evaluate(flat, _limits(), 1))
    flat[18].late_sends = 88
    evaluation = guard_soak(evaluate(flat, _limits(), 1), flat, _limits())
    drift = [o for o in evaluation.outcomes if o.rule == "p99-drift"]
    assert drift and all(o.passed is None for o in drift)  # evidence only: nothing judged
    assert evaluation.undecided[-1].startswith("p99 drift: the load generator fell behind (88 late sends in window 18")
    lagging = [_window(i, p99=5) for i in range(20)]
    lagging[18].loop_lag_max_ms = 80.0  # answers read late: a flat p99 stands
    kept = guard_soak(evaluate(lagging, _limits(), 1), lagging, _limits())
    assert any(o.passed is True for o in kept.outcomes if o.rule == "p99-drift")
    assert not any(u.startswith("p99 drift") for u in kept.undecided)
