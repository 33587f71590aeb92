"""Unit tests of the report's pure logic, no server: the verdict roll-up, check titles, the
wording of values and details, the terminal rows and the Markdown summary."""

from __future__ import annotations

import pytest

from pytest_triton_ready.plugin.results import check_title
from pytest_triton_ready.record.model import Finding, MeasuredValue, Result, Verdict
from pytest_triton_ready.record.text import detail, format_bytes, format_threshold, format_value, measurement_label, outcome_mark, shorten
from pytest_triton_ready.record.verdict import checklist, overall_verdict, verdict_counts, verdict_reason, worst
from pytest_triton_ready.report.markdown import render_markdown
from pytest_triton_ready.report.terminal import checklist_rows


def result(check_id: str, verdict: Verdict, blocking: bool = True, reason: str | None = None,
           findings: list[Finding] | None = None, measurements: list[MeasuredValue] | None = None,
           title: str = "A check", phase: str = "config", name: str | None = None) -> Result:
    return Result(check_id, phase, title, f"checks/t.py::{name or check_id}", verdict, blocking, reason,
                  measurements=measurements or [], findings=findings or [])


# -- verdict roll-up ---------------------------------------------------------------------------------
def test_reason_names_failed_then_undecided_blocking_checks_once_each():
    results = [result("CFG-1", Verdict.FAIL), result("CFG-1", Verdict.FAIL, name="b"), result("PERF-1", Verdict.ERROR),
               result("PERF-2", Verdict.INCOMPLETE), result("MON-1", Verdict.FAIL, blocking=False)]
    assert overall_verdict(results) == "NOT READY"
    assert verdict_reason(results) == "blocking checks failed: CFG-1; could not run: PERF-1, PERF-2"


def test_reason_of_an_incomplete_run():
    results = [result("CFG-1", Verdict.PASS), result("PERF-3", Verdict.INCOMPLETE)]
    assert overall_verdict(results) == "INCOMPLETE"
    assert verdict_reason(results) == "blocking checks could not run or broke: PERF-3"


def test_reason_of_a_ready_run_counts_passes_not_applicable_and_failed_advisories():
    results = [result("CFG-1", Verdict.PASS), result("CFG-2", Verdict.PASS), result("CFG-4", Verdict.NOT_APPLICABLE),
               result("PERF-1", Verdict.FAIL, blocking=False), result("MON-4", Verdict.ERROR, blocking=False)]
    assert overall_verdict(results) == "READY"
    assert verdict_reason(results) == ("all 2 blocking checks passed; 1 not applicable; advisory checks failed: "
                                       "PERF-1, MON-4")
    assert overall_verdict([]) == "INCOMPLETE"  # nothing ran: nothing to call READY


def test_an_item_shows_its_worst_verdict():
    assert worst([Verdict.PASS, Verdict.INCOMPLETE, Verdict.NOT_APPLICABLE]) == Verdict.INCOMPLETE
    assert worst([Verdict.ERROR, Verdict.FAIL]) == Verdict.FAIL
    assert worst([Verdict.NOT_APPLICABLE, Verdict.PASS]) == Verdict.PASS
    assert worst([]) == Verdict.NOT_APPLICABLE


def test_checklist_rolls_checks_up_by_id_in_first_seen_order():
    results = [result("CFG-1", Verdict.PASS, name="a"), result("PERF-1", Verdict.FAIL, blocking=False, phase="performance"),
               result("CFG-1", Verdict.INCOMPLETE, name="b"), result("PERF-1", Verdict.PASS, phase="performance", name="c")]
    assert checklist(results) == [
        {"check_id": "CFG-1", "phase": "config", "blocking": True, "verdict": "incomplete",
         "nodeids": ["checks/t.py::a", "checks/t.py::b"]},
        {"check_id": "PERF-1", "phase": "performance", "blocking": True, "verdict": "fail",
         "nodeids": ["checks/t.py::PERF-1", "checks/t.py::c"]},
    ]


def test_verdict_counts_list_every_verdict():
    counts = verdict_counts([result("A", Verdict.PASS), result("B", Verdict.PASS), result("C", Verdict.ERROR)])
    assert counts == {"pass": 2, "fail": 0, "incomplete": 0, "not_applicable": 0, "error": 1}


# -- check titles ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("docstring", "title"), [
    ("Every model is READY.", "Every model is READY"),
    ("""At each model's target load the p99 latency is within budget, the throughput reaches the
    target, and at least success_rate_min of the requests succeed.""",
     "At each model's target load the p99 latency is within budget, the throughput reaches the target, and at "
     "least success_rate_min of the requests succeed"),
    ("GPU memory stays under 90%. Host memory next.", "GPU memory stays under 90%"),
    ("Sweeping up to 2 x max_batch_size (e.g. 16). The knee is reported.", "Sweeping up to 2 x max_batch_size (e.g. 16)"),
    ("Triton 2.51 answers on port 8000. Then more.", "Triton 2.51 answers on port 8000"),  # "2.51" is no stop
    ("First paragraph without a stop\n\nSecond paragraph.", "First paragraph without a stop"),
])
def test_a_title_is_the_first_sentence_of_the_docstring(docstring, title):
    assert check_title(docstring) == title


# -- wording -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "unit", "text"), [
    (None, "ms", "—"), (True, "", "yes"), (False, "", "no"), (12.34567, "ms", "12.35 ms"), (0.000123456, "", "0.0001235"),
    (1234567.0, "B", "1.235e+06 B"), (42, "requests", "42 requests"), ("ok", "", "ok"),
])
def test_values_read_with_four_significant_digits_and_their_unit(value, unit, text):
    assert format_value(value, unit) == text


@pytest.mark.parametrize(("value", "text"), [
    (None, "—"), (512, "512 B"), (2048, "2.0 KiB"), (150.5 * 2**30, "150.5 GiB"), (3 * 2**40, "3.0 TiB"), (2**20 - 1, "1024.0 KiB"),
])
def test_memory_sizes_read_in_binary_units(value, text):
    assert format_bytes(value) == text


def test_a_measurement_reads_with_its_model_threshold_and_mark():
    held = MeasuredValue("p99 latency", 12.5, "ms", model="scale", threshold=50, comparison="<=", passed=True)
    assert measurement_label(held) == "scale: p99 latency"
    assert format_threshold(held) == "<= 50 ms"
    assert outcome_mark(held) == "✓"
    missed = MeasuredValue("success rate", 0.9, "ratio", threshold=0.999, comparison=">=", passed=False)
    assert (measurement_label(missed), format_threshold(missed), outcome_mark(missed)) == (
        "success rate", ">= 0.999 ratio", "✗")
    plain = MeasuredValue("state", "READY")
    assert (format_threshold(plain), outcome_mark(plain)) == ("", "")


def test_detail_says_what_decided_a_check():
    failed = result("CFG-1", Verdict.FAIL, findings=[Finding("scale is UNAVAILABLE"), Finding("x", "warning"),
                                                      Finding("sum is UNAVAILABLE")])
    assert detail(failed) == "scale is UNAVAILABLE (+1 more)"
    assert detail(result("PERF-3", Verdict.INCOMPLETE, reason="the soak is turned off")) == "the soak is turned off"
    measured = result("PERF-1", Verdict.PASS, findings=[Finding("slow-ish", "warning")], measurements=[
        MeasuredValue("p99", 1.0, "ms", threshold=2, comparison="<=", passed=True),
        MeasuredValue("success", 0.5, threshold=1, comparison=">=", passed=False), MeasuredValue("throughput", 10.0)])
    assert detail(measured) == "p99 1 ms <= 2 ms (1 warning)"  # a pass leads with its key number
    assert detail(result("X", Verdict.FAIL, measurements=[measured.measurements[1]])) == \
        "1 measurement, 0/1 within threshold"
    assert detail(result("X", Verdict.PASS, measurements=[MeasuredValue("one", 1)])) == "one 1"
    assert detail(result("X", Verdict.PASS)) == ""


def test_shorten_collapses_whitespace_and_cuts_with_an_ellipsis():
    assert shorten("a  b\n c", 10) == "a b c"
    assert shorten("abcdefghij", 10) == "abcdefghij"
    assert shorten("abcdefghijk", 10) == "abcdefghi…"


# -- terminal rows -----------------------------------------------------------------------------------
def test_terminal_rows_put_a_pass_on_one_line_and_say_why_under_a_failure():
    results = [
        result("CFG-1", Verdict.PASS, title="Every model is READY", measurements=[MeasuredValue("state", "READY")],
               name="test_models_ready"),
        result("PERF-1", Verdict.FAIL, blocking=False, title="GPU busy under load",
               findings=[Finding("GPU utilization 20% is below 70%")], name="test_gpu_busy"),
        result("SEC-1", Verdict.INCOMPLETE, title="Restricted APIs need credentials", reason="no restricted API declared",
               name="test_restricted_apis"),
    ]
    pass_row, fail_row, incomplete_row = checklist_rows(results, width=100)
    assert pass_row.head.startswith("CFG-1   models ready ")
    # id width 6 (PERF-1); the names' column as wide as the longest, "restricted apis" (15)
    assert len(pass_row.head) == 6 + 2 + 15 + 2
    assert pass_row.verdict.strip() == "pass" and pass_row.tail == "state READY" and pass_row.why == ""
    assert pass_row.markup == {"green": True}
    assert fail_row.verdict.strip() == "fail*"  # advisory
    assert fail_row.tail == "" and fail_row.why == " " * 8 + "GPU utilization 20% is below 70%"
    assert fail_row.markup == {"red": True, "bold": True}
    assert incomplete_row.why.strip() == "no restricted API declared"
    assert incomplete_row.markup == {"yellow": True}


def test_terminal_rows_name_a_check_by_id_and_short_name_not_a_cut_title():
    title = "The server is live and ready, and every model in scope is READY with its configuration"
    (row,) = checklist_rows([result("OPS-1", Verdict.PASS, title=title, name="test_server_live_and_ready")], width=80)
    assert row.head.rstrip() == "OPS-1  server live and ready"
    assert "…" not in row.head and "The server is live" not in row.head
    params = [result("CFG-4", Verdict.PASS, name="test_headroom[scale]"),
              result("CFG-4", Verdict.PASS, name="test_headroom[cached_sum]")]
    assert [r.head.rstrip() for r in checklist_rows(params)] == ["CFG-4  headroom [scale]", "CFG-4  headroom [cached_sum]"]


def test_terminal_names_are_cut_at_a_word_to_the_width():
    name = "test_new_version_rollout_under_traffic_loses_no_request"
    (row,) = checklist_rows([result("PERF-4", Verdict.PASS, name=name)], width=80)
    shown = row.head[len("PERF-4  "):].rstrip()
    assert len(shown) <= 80 - 6 - 6 - 24 and shown.endswith("…")  # 24 columns stay for what decided it
    assert shown == "new version rollout under traffic loses no…"
    (wide,) = checklist_rows([result("PERF-4", Verdict.PASS, name=name)], width=160)
    assert wide.head.rstrip() == "PERF-4  new version rollout under traffic loses no request"


# -- Markdown ----------------------------------------------------------------------------------------
def document_of(results: list[Result]) -> dict:
    return {"schema_version": "1.0", "verdict": overall_verdict(results), "verdict_reason": verdict_reason(results),
            "checklist": checklist(results), "results": [r.to_dict() for r in results],
            "context": {"runner": {"pytest_triton_ready": "9.9"}, "server": {"name": "triton", "version": "2.51.0"},
                        "endpoints": {"http_url": "http://127.0.0.1:8000"},
                        "models": [{"name": "scale", "version": "1", "state": "READY"}],
                        "gpus": {"gpus": [], "unavailable_reason": "no nv_gpu_* metrics"}},
            "started_at": "2025-01-01T10:00:00Z", "finished_at": "2025-01-01T10:08:00Z",
            "summary": {"total": len(results)}}


def test_markdown_summary_lists_every_check_and_each_failure_with_its_section():
    results = [
        result("CFG-1", Verdict.PASS, title="Every model is READY"),
        result("PERF-1", Verdict.FAIL, title="Benchmark meets the SLO", phase="performance",
               findings=[Finding("scale: p99 80.0 ms exceeds the 50 ms budget")],
               measurements=[MeasuredValue("p99 latency", 80.0, "ms", "scale", 50, "<=", passed=False)]),
        result("MON-2", Verdict.INCOMPLETE, title="Alert rules can fire", phase="monitoring", reason="no prometheus"),
        result("CFG-4", Verdict.NOT_APPLICABLE, title="GPU memory headroom", reason="no GPU instances"),
        result("SEC-3", Verdict.PASS, title="Malformed | requests", phase="security",
               findings=[Finding("slow error answer", "warning")]),
    ]
    text = render_markdown(document_of(results))
    lines = text.splitlines()
    assert lines[0] == "# Triton readiness: NOT READY"
    assert "**NOT READY**: blocking checks failed: PERF-1; could not run: MON-2." in lines
    assert "- **Server**: triton 2.51.0 at http://127.0.0.1:8000" in lines
    assert "- **Models**: scale v1 (READY)" in lines
    assert "- **GPUs**: none visible: no nv_gpu_* metrics" in lines
    assert "- **Run**: 2025-01-01T10:00:00Z to 2025-01-01T10:08:00Z, 5 checks" in lines
    assert "Checklist items: CFG-1 ✓ · PERF-1 ✗ · MON-2 – · CFG-4 – · SEC-3 ✓" in lines
    assert "| ✗ | PERF-1 | performance | Benchmark meets the SLO | fail | 0 | scale: p99 80.0 ms exceeds the 50 ms budget |" \
        in lines
    assert any(line.startswith("| ✓ | SEC-3 | security | Malformed \\| requests |") for line in lines)
    for heading in ("## Failures", "## Could not run", "## Not applicable", "## Warnings"):
        assert heading in lines
    assert "- – **MON-2** Alert rules can fire (incomplete): no prometheus" in lines
    assert "- – **CFG-4** GPU memory headroom: no GPU instances" in lines
    assert "- **SEC-3** slow error answer" in lines
    assert text.rstrip().splitlines()[-1].startswith("<sub>pytest-triton-ready 9.9, report schema 1.0.")


def test_markdown_of_a_ready_run_has_no_problem_sections():
    text = render_markdown(document_of([result("CFG-1", Verdict.PASS)]))
    assert "**READY**: all 1 blocking checks passed." in text
    assert "## Failures" not in text and "## Could not run" not in text and "## Warnings" not in text
