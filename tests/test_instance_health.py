"""A model instance that dies under load fails the check it died in, whatever the success rate:
PERF-1 and PERF-2 against the test model `mortal` (two instances; the stub of mortal_0_0 exits
after 300 requests, once per server) on a server this run launches, which recovers the model."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from conftest import QUICK_CHECKLIST, TEST_REPOSITORIES


def _messages(result, severity="error"):
    return [f["message"] for f in result["findings"] if f["severity"] == severity]


def test_an_instance_that_dies_under_load_makes_the_run_not_ready(run_checklist):
    markers = set(Path(tempfile.gettempdir()).glob("triton-ready-mortal-died-*"))
    started = time.monotonic()
    try:
        run = run_checklist("test_performance.py", url=None,
                            args=("-k", "benchmark or curve", "--triton-launch=embedded",
                                  f"--triton-model-repository={TEST_REPOSITORIES / 'mortal'}",
                                  f"--triton-config={QUICK_CHECKLIST}",
                                  # at least 4 s per measurement: a rule decided early must not end the
                                  # load before the stub's 300th request (this tests a death under load)
                                  "--triton-threshold", "load_min_duration_s=4",
                                  "--triton-threshold", "load_max_windows=12"))
    finally:  # the model's once-per-server marker: a later server with the same pid must die again
        for marker in set(Path(tempfile.gettempdir()).glob("triton-ready-mortal-died-*")) - markers:
            marker.unlink(missing_ok=True)
    took = time.monotonic() - started
    report = run.report
    assert report["verdict"] == "NOT READY", report["verdict"]
    assert run.outcome.ret == 1

    perf1 = run.result("test_benchmark_meets_slo_at_target_load")
    assert perf1["verdict"] == "fail", perf1
    dead_messages = [m for m in _messages(perf1) if "mortal_0_0" in m]
    assert len(dead_messages) == 1, "\n".join(f["message"] for f in perf1["findings"])
    [dead] = dead_messages
    assert dead.startswith("mortal: instance mortal_0_0 died during PERF-1 (first failed request ")
    assert "s into the check (" in dead and ", concurrency 8, after " in dead
    assert "is not healthy" in dead
    assert any("mortal_0_0 had to be recovered by unload + load" in m for m in _messages(perf1, "warning"))
    evidence = {e["label"]: e["text"] for e in perf1["evidence"]}
    assert "mortal dead instance mortal_0_0" in evidence and "mortal recovery" in evidence
    assert "every instance answered a probe" in evidence["mortal recovery"]

    perf2 = run.result("test_throughput_latency_curve")  # the recovered model: healthy, and said so
    assert any(m.startswith("mortal: an instance died in an earlier check (mortal_0_0 in PERF-1 ")
               and "recovered by unload + load" in m for m in _messages(perf2, "warning")), perf2["findings"]
    assert not any("died during PERF-2" in m for m in _messages(perf2))
    assert any(m["name"] == "dead model instances" and m["value"] == 0 for m in perf2["measurements"])
    print(f"PERF-1 finding: {dead}\nPERF-1 {perf1['duration_s']:.1f} s, PERF-2 {perf2['duration_s']:.1f} s, "
          f"the whole run {took:.1f} s\n{evidence['mortal recovery']}")
