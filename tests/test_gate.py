"""The gate's answer: verdict and exit code agree, a run that left checks out is never READY, a
rerun replaces a result, Ctrl-C and SIGTERM still write the report, xdist is refused.

The checklists here need no server: their checks record through the `check` fixture only, so
every case runs in a couple of seconds in a real pytest subprocess."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_triton_ready.gate import EXIT_CODES, Scope, ScopeItem, WaiverError, exit_code, parse_waivers
from pytest_triton_ready.plugin.finish import ran_nothing
from pytest_triton_ready.record.model import Result, Verdict
from pytest_triton_ready.record.verdict import Gaps, overall_verdict, verdict_reason
from pytest_triton_ready.run import Run

TODAY = dt.date(2026, 11, 30)

CHECKLIST = '''
import os, time
import pytest

@pytest.mark.triton_check("CFG-1")
def test_first(check):
    """The first check passes."""
    check.measure("answer", 42, threshold=50)

@pytest.mark.triton_check("MON-1")
def test_second(check):
    """The second check fails unless FIX_SECOND is set, or passes on its second attempt with FLAKY_FILE."""
    marker = os.environ.get("FLAKY_FILE")
    if marker:
        if not os.path.exists(marker):
            open(marker, "w").close()
            check.finding("failed on the first attempt")
        check.measure("attempts before this one", 1, threshold=1)
        return
    check.measure("errors", 0 if os.environ.get("FIX_SECOND") else 3, threshold=0)

@pytest.mark.triton_check("OPS-3")
def test_third(check):
    """The third check sleeps when SLOW is set (to be interrupted); with SILENT it records nothing."""
    if os.environ.get("SLOW"):
        print("third check started", flush=True)
        time.sleep(60)
    if not os.environ.get("SILENT"):
        check.measure("slept", 60 if os.environ.get("SLOW") else 0, "s", threshold=60)
'''


def _result(check_id: str, verdict: Verdict, *, blocking: bool = True, flaky: bool = False) -> Result:
    return Result(check_id, "config", "a check", f"t.py::test_{check_id}", verdict, blocking=blocking,
                  reason=None if verdict in (Verdict.PASS, Verdict.FAIL) else "why", flaky=flaky)


# -- the pure rules --------------------------------------------------------------------------------
@pytest.mark.parametrize("verdicts, gaps, expected", [
    ([Verdict.PASS, Verdict.NOT_APPLICABLE], Gaps(), "READY"),
    ([Verdict.PASS, Verdict.FAIL], Gaps(), "NOT READY"),
    ([Verdict.PASS, Verdict.INCOMPLETE], Gaps(), "INCOMPLETE"),
    ([Verdict.PASS, Verdict.ERROR], Gaps(), "INCOMPLETE"),
    ([Verdict.PASS], Gaps(not_run=("t.py::test_x",)), "PARTIAL"),
    ([Verdict.PASS, Verdict.INCOMPLETE], Gaps(not_run=("t.py::test_x",)), "INCOMPLETE"),
    ([Verdict.FAIL], Gaps(not_run=("t.py::test_x",)), "NOT READY"),
    ([Verdict.PASS], Gaps(expired_waivers=("PERF-3 (expired 2026-01-01, ops)",)), "INCOMPLETE"),
    ([], Gaps(), "INCOMPLETE"),
])
def test_overall_verdict_rules(verdicts, gaps, expected):
    results = [_result(f"CFG-{i}", v) for i, v in enumerate(verdicts)]
    assert overall_verdict(results, gaps) == expected


def test_a_flaky_pass_blocks_unless_allowed():
    results = [_result("CFG-1", Verdict.PASS), _result("PERF-1", Verdict.PASS, flaky=True)]
    assert overall_verdict(results, Gaps()) == "NOT READY"
    assert verdict_reason(results, Gaps()) == "passed only when rerun (flaky): PERF-1"
    assert overall_verdict(results, Gaps(allow_flaky=True)) == "READY"


def test_reason_names_what_did_not_run():
    gaps = Gaps(not_run=tuple(f"t.py::test_{i}" for i in range(7)))
    reason = verdict_reason([_result("CFG-1", Verdict.PASS)], gaps)
    assert reason == "7 checks in scope did not run: t.py::test_0, t.py::test_1, t.py::test_2, t.py::test_3, t.py::test_4 and 2 more"


@pytest.mark.parametrize("verdict, status, unreachable, expected", [
    ("READY", 0, False, 0), ("NOT READY", 1, False, 1), ("NOT READY", 0, False, 1),  # rerun passed, still flaky
    ("INCOMPLETE", 0, False, 6), ("PARTIAL", 0, False, 7), ("PARTIAL", 5, False, 5),
    ("INCOMPLETE", 2, False, 2), ("INCOMPLETE", 4, False, 4), ("INCOMPLETE", 2, True, 8),
    ("READY", 1, False, 1),  # an ordinary test beside the checklist failed
])
def test_exit_code_per_verdict(verdict, status, unreachable, expected):
    assert exit_code(verdict, pytest_status=status, unreachable=unreachable) == expected


def test_waivers_need_every_field_and_a_date():
    good = parse_waivers([{"check": "PERF-3", "reason": "soak runs nightly", "owner": "ml-platform",
                           "expires": "2027-01-31"}], "t.yaml")
    assert good[0].expires == dt.date(2027, 1, 31) and good[0].covers("PERF-3", "test_soak")
    with pytest.raises(WaiverError, match=r"t.yaml: gate.waivers\[0\]: a waiver needs owner, expires"):
        parse_waivers([{"check": "PERF-3", "reason": "x"}], "t.yaml")
    with pytest.raises(WaiverError, match="is not a date"):
        parse_waivers([{"check": "PERF-3", "reason": "x", "owner": "y", "expires": "soon"}], "t.yaml")


def test_scope_lists_not_run_waived_expired_and_unused():
    waivers = parse_waivers([
        {"check": "PERF-3", "reason": "nightly", "owner": "a", "expires": "2027-01-01"},
        {"check": "test_rules", "reason": "old", "owner": "b", "expires": "2026-01-01"},
        {"check": "PREF-4", "reason": "typo", "owner": "c", "expires": "2027-01-01"},
    ], "t.yaml")
    items = [ScopeItem("c.py::test_live", "CFG-1", "test_live"), ScopeItem("c.py::test_soak", "PERF-3", "test_soak"),
             ScopeItem("c.py::test_rules", "MON-2", "test_rules"), ScopeItem("c.py::test_tls", "SEC-2", "test_tls")]
    scope = Scope("the packaged checklist", items, deselected={"c.py::test_tls"}, waivers=waivers, today=TODAY)
    document = scope.to_dict(recorded={"c.py::test_live", "c.py::test_rules"})
    assert document["in_scope"] == 4 and document["ran"] == 2
    assert [(e["check_id"], e["why"]) for e in document["not_run"]] == [("SEC-2", "deselected")]
    assert [(e["check_id"], e["owner"]) for e in document["waived"]] == [("PERF-3", "a")]
    assert [e["check"] for e in document["expired_waivers"]] == ["test_rules"]
    assert [e["check"] for e in document["unused_waivers"]] == ["PREF-4"]


# -- real pytest runs --------------------------------------------------------------------------------
@pytest.fixture
def subprocess_checklist(tmp_path: Path) -> Path:
    """A checklist file that needs no server, for real pytest subprocess runs."""
    path = tmp_path / "test_mini_checklist.py"
    path.write_text(CHECKLIST)
    return path


def _run(checklist: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    report = checklist.parent / "report"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(checklist), f"--readiness-report={report}", "-p", "no:cacheprovider",
         f"--junitxml={checklist.parent / 'junit.xml'}", *args],
        cwd=checklist.parent, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )
    path = report / "readiness.json"
    return result, (json.loads(path.read_text()) if path.exists() else {})


def _suite_properties(checklist: Path) -> dict[str, list[str]]:
    properties: dict[str, list[str]] = {}
    for prop in ET.parse(checklist.parent / "junit.xml").getroot().iter("property"):
        properties.setdefault(prop.get("name"), []).append(prop.get("value"))
    return properties


def test_exit_code_is_the_verdict(subprocess_checklist):
    ready, report = _run(subprocess_checklist, env={"FIX_SECOND": "1"})
    assert (ready.returncode, report["verdict"]) == (EXIT_CODES["READY"], "READY"), ready.stdout[-2000:]
    not_ready, report = _run(subprocess_checklist)
    assert (not_ready.returncode, report["verdict"]) == (EXIT_CODES["NOT READY"], "NOT READY")
    assert _suite_properties(subprocess_checklist)["triton_ready_exit_code"] == ["1"]


def test_a_check_that_records_nothing_is_incomplete_not_a_pass(subprocess_checklist):
    result, report = _run(subprocess_checklist, env={"FIX_SECOND": "1", "SILENT": "1"})
    assert (result.returncode, report["verdict"]) == (EXIT_CODES["INCOMPLETE"], "INCOMPLETE"), result.stdout[-2000:]
    third = next(r for r in report["results"] if r["check_id"] == "OPS-3")
    assert third["verdict"] == "incomplete" and third["reason"].startswith("could not judge: The third check sleeps")
    assert third["rules_judged"] == 0


def test_a_k_subset_is_partial_and_names_what_did_not_run(subprocess_checklist):
    result, report = _run(subprocess_checklist, "-k", "first")
    assert result.returncode == EXIT_CODES["PARTIAL"], result.stdout[-2000:]
    assert report["verdict"] == "PARTIAL"
    assert report["scope"]["in_scope"] == 3 and report["scope"]["ran"] == 1
    assert sorted(e["check_id"] for e in report["scope"]["not_run"]) == ["MON-1", "OPS-3"]
    assert "not run: 2 of 3 checks in scope (MON-1, OPS-3)" in result.stdout
    assert "triton-ready verdict: PARTIAL" in result.stdout.splitlines()[-1]
    assert any("MON-1" in v for v in _suite_properties(subprocess_checklist)["triton_ready_not_run"])


def test_a_waiver_leaves_a_check_out_and_an_expired_one_blocks(subprocess_checklist, tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text(textwrap.dedent("""\
        gate:
          waivers:
            - {check: MON-1, reason: "metrics pipeline moves next sprint", owner: ml-platform, expires: 2999-01-01}
            - {check: OPS-3, reason: "DR test scheduled", owner: sre, expires: 2999-01-01}
    """))
    result, report = _run(subprocess_checklist, f"--triton-config={config}")
    assert (result.returncode, report["verdict"]) == (0, "READY"), result.stdout[-2000:]
    assert [e["check_id"] for e in report["scope"]["waived"]] == ["MON-1", "OPS-3"]
    assert "waived: MON-1 test_second: metrics pipeline moves next sprint (owner ml-platform, expires 2999-01-01)" in result.stdout
    config.write_text(config.read_text().replace("2999-01-01}", "2020-01-01}", 1))
    result, report = _run(subprocess_checklist, f"--triton-config={config}", env={"FIX_SECOND": "1"})
    assert (result.returncode, report["verdict"]) == (EXIT_CODES["INCOMPLETE"], "INCOMPLETE")
    assert "expired waivers: MON-1 (expired 2020-01-01, ml-platform)" in report["verdict_reason"]


def test_a_rerun_replaces_the_result_and_a_flaky_pass_is_not_ready(subprocess_checklist, tmp_path):
    flag = tmp_path / "attempted"
    result, report = _run(subprocess_checklist, "-p", "rerunfailures", "--reruns", "1", env={"FLAKY_FILE": str(flag)})
    assert result.returncode == EXIT_CODES["NOT READY"], result.stdout[-2000:]
    second = [r for r in report["results"] if r["check_id"] == "MON-1"]
    assert len(second) == 1 and second[0]["verdict"] == "pass" and second[0]["flaky"] is True
    assert second[0]["evidence"][0] == {"label": "first attempt (fail)", "text": "failed on the first attempt"}
    assert report["verdict_reason"] == "passed only when rerun (flaky): MON-1"
    config = tmp_path / "allow.yaml"
    config.write_text("gate:\n  allow_flaky: true\n")
    flag.unlink()
    result, report = _run(subprocess_checklist, "-p", "rerunfailures", "--reruns", "1", f"--triton-config={config}",
                          env={"FLAKY_FILE": str(flag)})
    assert (result.returncode, report["verdict"]) == (0, "READY"), result.stdout[-2000:]


def test_a_session_that_runs_no_check_leaves_the_last_report_as_it_was(subprocess_checklist):
    first, report = _run(subprocess_checklist)
    assert report["verdict"] == "NOT READY", first.stdout[-2000:]
    written = (subprocess_checklist.parent / "report" / "readiness.json").read_bytes()
    listed, after = _run(subprocess_checklist, "--collect-only")
    assert listed.returncode == 0 and after == report, listed.stdout[-2000:]
    assert "no check ran; the report in" in listed.stdout and "triton-ready verdict" not in listed.stdout
    nothing, after = _run(subprocess_checklist, "-k", "no_such_check")
    assert after == report and (subprocess_checklist.parent / "report" / "readiness.json").read_bytes() == written
    assert nothing.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, nothing.stdout[-2000:]


def test_ran_nothing_is_a_listing_or_a_session_without_results_or_a_cause_to_report():
    run = Run.__new__(Run)
    run.results, run.target_error, run.collection_errors = [], None, []
    assert ran_nothing(run, collect_only=False) and ran_nothing(run, collect_only=True)
    run.target_error = "cannot reach Triton at http://127.0.0.1:1: connection refused"
    assert not ran_nothing(run, collect_only=False)  # the report says why nothing ran


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_write_the_report_with_the_rest_incomplete(subprocess_checklist, sig):
    report_dir = subprocess_checklist.parent / "report"
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(subprocess_checklist), f"--readiness-report={report_dir}", "-p", "no:cacheprovider",
         f"--junitxml={subprocess_checklist.parent / 'junit.xml'}", "-s"],
        cwd=subprocess_checklist.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "SLOW": "1", "FIX_SECOND": "1"},
    )
    deadline = time.monotonic() + 60
    for line in process.stdout:
        if "third check started" in line or time.monotonic() > deadline:
            break
    process.send_signal(sig)
    output = process.communicate(timeout=60)[0]
    assert process.returncode == 2, output[-2000:]  # pytest's "interrupted"
    report = json.loads((report_dir / "readiness.json").read_text())
    verdicts = {r["check_id"]: (r["verdict"], r["reason"]) for r in report["results"]}
    assert verdicts["CFG-1"][0] == "pass" and verdicts["MON-1"][0] == "pass"
    assert verdicts["OPS-3"] == ("incomplete", "not run: the run was interrupted (Ctrl-C or SIGTERM)")
    assert report["verdict"] == "INCOMPLETE"
    assert (subprocess_checklist.parent / "junit.xml").exists()


def test_xdist_is_refused_with_one_line(subprocess_checklist):
    pytest.importorskip("xdist")
    result, _ = _run(subprocess_checklist, "-p", "xdist", "-n", "2", "--triton-url=http://127.0.0.1:1")
    assert result.returncode == 4
    assert "the checklist runs in one process, in order" in result.stderr


def test_an_unreachable_server_is_one_line_its_exit_code_and_a_report(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pytest_triton_ready.cli", "--triton-url=http://127.0.0.1:1"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 8, result.stdout[-2000:]
    mentions = [line for line in (result.stdout + result.stderr).splitlines() if "cannot reach Triton" in line]
    assert mentions[0].endswith("triton-ready: cannot reach Triton at http://127.0.0.1:1: connection refused !")
    assert len(mentions) == 2  # the stop, and the verdict line that repeats why
    assert "Traceback" not in result.stdout + result.stderr and "ERROR at setup" not in result.stdout
    report = json.loads((tmp_path / "triton-ready-report" / "readiness.json").read_text())
    assert report["verdict"] == "INCOMPLETE" and report["scope"]["in_scope"] == len(report["results"])
    assert report["verdict_reason"].startswith("cannot reach Triton at http://127.0.0.1:1: connection refused; "
                                               "the run stopped there")


def test_a_verdict_for_some_models_names_the_models_left_out():
    from pytest_triton_ready.run import Run
    from pytest_triton_ready.settings import build_settings

    run = Run(build_settings({"triton_models": "scale"}, {}, environ={}))
    run.results = [_result("CFG-1", Verdict.PASS)]
    run.context = {"models": [{"name": n} for n in ("scale", "accumulate", "cached_sum")]}
    assert run.verdict_reason() == ("all 1 blocking checks passed; 2 of the 3 models the server lists were not "
                                    "checked (--triton-models): accumulate, cached_sum")
    everything = Run(build_settings({}, {}, environ={}), results=run.results, context=run.context)
    assert everything.verdict_reason() == "all 1 blocking checks passed"
