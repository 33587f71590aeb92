"""The judged-rule ledger: only a rule judged on data measured in this run earns a PASS.

Unit tests without a Triton server: the recorder's three kinds of entry (judgements, information,
settings), the INCOMPLETE rule for a check that judged nothing, how the report counts the rules each
check judged, and a walk of every check of the packaged checklist against a stand-in server whose
data sources are empty (tests/empty_server.py), where no check may PASS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from empty_server import closed_port, empty_server

from conftest import CHECKS
from pytest_triton_ready.record.model import Result, Verdict
from pytest_triton_ready.record.recorder import CheckRecorder

TINY_CHECKS = '''
import pytest

@pytest.mark.triton_check("OPS-3")
def test_informs_only(check):
    """Every instance stays alive."""
    check.measure("dead model instances", 0, "instances")
    check.finding("all quiet", severity="warning")

@pytest.mark.triton_check("OPS-4")
def test_judges_a_rule_on_what_it_measured(check):
    """Every answer is correct."""
    check.setting("offered load", 5, "infer/s", source="performance.rate")
    check.measure("answers received", 3, "answers")
    check.judge("answers-correct", True, measured="3 answers received")

@pytest.mark.triton_check("OPS-1")
def test_holds_a_measurement_against_a_threshold(check):
    """p99 stays within its budget."""
    check.measure("p99 latency", 4.0, "ms", threshold=5.0)

@pytest.mark.triton_check("OPS-2")
def test_judges_a_rule_that_fails(check):
    """Every answer is correct."""
    check.judge("answers-correct", False, measured="3 answers received", finding="1 of 3 answers is wrong")
'''


def _run_pytest(where: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_READY_")}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=where, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    where = tmp_path_factory.mktemp("ledger")
    (where / "test_tiny.py").write_text(TINY_CHECKS)
    done = _run_pytest(where, "test_tiny.py", f"--triton-url=http://127.0.0.1:{closed_port()}",
                       f"--readiness-report={where / 'report'}", f"--junitxml={where / 'junit.xml'}")
    document = json.loads((where / "report" / "readiness.json").read_text())
    results = {r["nodeid"].split("::")[-1]: r for r in document["results"]}
    return done, results, where


def test_a_check_that_recorded_only_information_is_incomplete_naming_what_it_could_not_judge(tiny_run):
    done, results, _ = tiny_run
    informs = results["test_informs_only"]
    assert informs["verdict"] == "incomplete", done.stdout
    assert informs["reason"].startswith("could not judge: Every instance stays alive: no rule was judged")
    assert "dead model instances" in informs["reason"] and informs["rules_judged"] == 0


def test_judgements_earn_the_pass_and_settings_are_no_measurements(tiny_run):
    _, results, _ = tiny_run
    judged = results["test_judges_a_rule_on_what_it_measured"]
    assert judged["verdict"] == "pass" and judged["rules_judged"] == 1
    assert judged["judgements"] == [{"rule": "answers-correct", "passed": True, "model": None,
                                     "measured": "3 answers received"}]
    assert [m["name"] for m in judged["measurements"]] == ["answers received"]
    assert judged["settings"] == [{"name": "offered load", "value": 5, "unit": "infer/s", "model": None,
                                   "source": "performance.rate"}]
    threshold = results["test_holds_a_measurement_against_a_threshold"]
    assert threshold["verdict"] == "pass" and threshold["judgements"][0]["rule"] == "p99 latency"
    failing = results["test_judges_a_rule_that_fails"]
    assert failing["verdict"] == "fail" and failing["findings"][0]["message"] == "1 of 3 answers is wrong"


def test_every_report_shows_how_many_rules_each_check_judged(tiny_run):
    _, _, where = tiny_run
    markdown = (where / "report" / "readiness.md").read_text()
    assert "| Rules judged |" in markdown
    assert any("p99 stays within its budget" in line and "| 1 |" in line for line in markdown.splitlines())
    html = (where / "report" / "readiness.html").read_text()
    assert "<th>Rules judged</th>" in html and "Rules judged on data measured in this run: 0" in html
    assert "offered load" in html and "Setting (configured, not measured)" in html
    junit = (where / "junit.xml").read_text()
    assert '<property name="rules_judged" value="1" />' in junit
    assert '<property name="setting offered load" value="5 infer/s" />' in junit


def test_a_measurement_without_a_threshold_and_warnings_judge_nothing():
    recorder = CheckRecorder(Result("OPS-1", "operations", "t", "n"))
    recorder.measure("dead model instances", 0, "instances")
    recorder.finding("slow", severity="warning")
    recorder.measure("p99", None, "ms", threshold=5.0)  # not measured: no judgement either
    assert not recorder.judged and recorder.result.rules_judged == 0
    recorder.finding("the model answered 500", rule="answers")  # an error finding is a failed judgement
    assert recorder.judged and recorder.result.judgements[-1].passed is False
    assert Result.from_dict(recorder.result.to_dict()).judgements == recorder.result.judgements


# -- every check of the packaged checklist, with its data sources empty ---------------------------------
QUICK = Path(__file__).parent / "data" / "quick-checklist.yaml"


@pytest.mark.parametrize("models", [(), ("m",)], ids=["no-models", "a-model-that-answers-nothing"])
def test_no_check_of_the_packaged_checklist_passes_when_its_data_sources_are_empty(tmp_path, models):
    """Walks all of checks/ against a server that answers no inference, exports no metric, has no
    model files to lint and (second case) lists one READY model that never answers: every check
    runs as far as it can, and a PASS here would have judged nothing."""
    (tmp_path / "repository").mkdir()
    with empty_server(models) as url:
        done = _run_pytest(tmp_path, str(CHECKS), f"--triton-url={url}", f"--triton-grpc-url=127.0.0.1:{closed_port()}",
                           f"--triton-metrics-url={url}/metrics", "--triton-allow=reload,faults,saturate,large_payloads",
                           f"--triton-model-repository={tmp_path / 'repository'}", f"--triton-config={QUICK}",
                           "--triton-soak=2s", "--triton-request-timeout=2", "--triton-threshold=curve_max_concurrency=2",
                           f"--readiness-report={tmp_path / 'report'}")
    document = json.loads((tmp_path / "report" / "readiness.json").read_text())
    results = document["results"]
    assert len(results) >= 40, done.stdout[-3000:]  # the whole checklist ran
    passed = [f"{r['check_id']} {r['nodeid']}" for r in results if r["verdict"] == Verdict.PASS.value]
    assert passed == [], done.stdout[-3000:]
    assert document["verdict"] != "READY"


# -- reruns: server tests only, counted, a unit test's rerun fails the session ----------------------------
RERUN_TESTS = '''
import pytest

attempts = {}

def _flaky(name):
    attempts[name] = attempts.get(name, 0) + 1
    assert attempts[name] > 1, "fails on its first attempt"

@pytest.mark.server
def test_server_flaky():
    _flaky("server")

def test_unit_flaky():
    _flaky("unit")
'''


def test_only_server_tests_are_rerun_and_a_unit_test_that_needed_a_rerun_fails_the_session(tmp_path):
    (tmp_path / "test_flaky.py").write_text(RERUN_TESTS)
    here = str(Path(__file__).parent)
    env_args = ("-p", "reruns", "-p", "no:triton_ready", "-o", "markers=server: real traffic", "test_flaky.py")

    def run(*extra):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))}
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *env_args, *extra],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    server_only = run("--server-reruns=1", "-m", "server")
    assert server_only.returncode == 0, server_only.stdout
    assert "1 reruns: 1 of server tests, 0 of unit tests" in server_only.stdout
    assert "      call: AssertionError: fails on its first attempt" in server_only.stdout  # what the first saw
    both = run("--server-reruns=1")
    assert both.returncode == 1 and "1 failed, 1 passed, 1 rerun" in both.stdout, both.stdout
    by_hand = run("--reruns=1")  # every test rerun: the unit test's pass on a rerun still fails the session
    assert by_hand.returncode == 1, by_hand.stdout
    assert "2 reruns: 1 of server tests, 1 of unit tests (a unit test that needed a rerun fails" in by_hand.stdout
