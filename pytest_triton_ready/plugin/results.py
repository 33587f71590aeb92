"""Turning a check's record into its outcome and Result: the recorder per check, the progress line
while it runs, its verdict (PASS, FAIL, ERROR, INCOMPLETE), one result per check, and the server's
warnings and errors beside a failure the server is involved in."""

from __future__ import annotations

import inspect
import re

import pytest

from ..facts import FactMissing
from ..record.model import Evidence, Result, Verdict
from ..record.recorder import CheckRecorder
from ..report.junit import junit_properties
from .state import RECORDER_KEY, RUN_KEY, check_identity


def _result_for(item: pytest.Item) -> Result | None:
    identity = check_identity(item)
    if identity is None:
        return None
    check_id, phase = identity
    marker = item.get_closest_marker("triton_check")
    return Result(check_id, phase, check_title(getattr(item, "function", None).__doc__ or item.name), item.nodeid,
                  blocking=marker.kwargs.get("blocking", True))


def check_title(docstring: str) -> str:
    """A check's title: the first sentence of its docstring, even when it wraps over lines."""
    paragraph = " ".join(inspect.cleandoc(docstring).split("\n\n")[0].split())
    sentence = re.split(r"(?<=[a-z0-9)%])\.\s+(?=[A-Z])", paragraph, maxsplit=1)[0]
    return sentence.rstrip(".")


def pytest_runtest_setup(item: pytest.Item) -> None:
    result = _result_for(item)
    if result is not None:
        marker = item.get_closest_marker("triton_check")
        item.stash[RECORDER_KEY] = CheckRecorder(result, item.config.stash[RUN_KEY].settings,
                                                 marker.kwargs.get("thresholds"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A progress line for a check that runs longer than a few seconds (progress.py)."""
    from .. import progress

    recorder = item.stash.get(RECORDER_KEY, None)
    write = progress.terminal_writer(item.config) if recorder is not None else None
    if write is None:
        return (yield)
    label = f"{recorder.result.check_id} {getattr(item, 'originalname', item.name)}"
    quiet_s = item.config.stash[RUN_KEY].settings.triton_progress_after
    with progress.running(label, write, quiet_s=quiet_s):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    recorder = pyfuncitem.stash.get(RECORDER_KEY, None)
    try:
        outcome = yield
    except FactMissing as missing:  # a fact an earlier check did not publish: INCOMPLETE naming it
        if recorder is None:
            raise
        if recorder.failed:
            pytest.fail(recorder.failure_text(), pytrace=False)
        recorder.incomplete(str(missing))
    if recorder is not None and recorder.failed:
        pytest.fail(recorder.failure_text(), pytrace=False)
    if recorder is not None and recorder.unmeasured:
        recorder.incomplete(f"not measured: {', '.join(recorder.unmeasured)}")
    if recorder is not None and not recorder.judged:
        recorder.incomplete(recorder.unjudged_text())
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    recorder = item.stash.get(RECORDER_KEY, None)
    if recorder is None:
        return report
    result = recorder.result
    if report.when == "setup" and report.outcome != "passed" or report.when == "call":
        result.duration_s += report.duration
        _settle_verdict(result, recorder, report, call)
        _keep_one_result(item.config.stash[RUN_KEY].results, result)
        if report.failed:
            _attach_server_log(item, report, result)
        # junitxml writes the properties of the teardown report, which copies item.user_properties
        item.user_properties.extend(junit_properties(result))
        report.user_properties = list(item.user_properties)
    return report


def _settle_verdict(result: Result, recorder: CheckRecorder, report: pytest.TestReport, call: pytest.CallInfo) -> None:
    if report.skipped:
        if result.verdict not in (Verdict.NOT_APPLICABLE, Verdict.INCOMPLETE):
            result.verdict = Verdict.INCOMPLETE
            result.reason = _skip_reason(report)
        return
    if report.passed:
        result.verdict = Verdict.PASS
        return
    message = _short_message(call)
    if report.when == "setup":
        result.verdict = Verdict.ERROR
        result.reason = message
        return
    result.verdict = Verdict.FAIL if recorder.failed or _is_check_failure(call) else Verdict.ERROR
    if result.verdict == Verdict.ERROR:
        result.reason = f"the check broke: {call.excinfo.typename}: {message}" if call.excinfo else message
    if not recorder.errors:
        recorder.finding(message, rule=result.check_id)


def _keep_one_result(results: list[Result], result: Result) -> None:
    """One result per check: a rerun replaces the earlier attempt, and a pass after a failure is
    marked flaky with the first failure kept as evidence."""
    for index, earlier in enumerate(results):
        if earlier is result:
            return
        if earlier.nodeid == result.nodeid:
            if earlier.verdict in (Verdict.FAIL, Verdict.ERROR) or earlier.flaky:
                result.flaky = result.verdict not in (Verdict.FAIL, Verdict.ERROR)
                first = "; ".join(f.message for f in earlier.findings if f.severity == "error") or earlier.reason
                result.evidence.insert(0, Evidence(f"first attempt ({earlier.verdict.value})", first or "no message"))
            results[index] = result
            return
    results.append(result)


def _is_check_failure(call: pytest.CallInfo) -> bool:
    return call.excinfo is not None and call.excinfo.errisinstance((AssertionError, pytest.fail.Exception))


def _short_message(call: pytest.CallInfo) -> str:
    if call.excinfo is None:
        return ""
    exc = call.excinfo.value
    text = getattr(exc, "msg", None) or str(exc) or call.excinfo.typename
    return text.strip().splitlines()[0] if text.strip() else call.excinfo.typename


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


SERVER_LOG_KEY = pytest.StashKey[set]()
CPU_ONLY_NOTED_KEY = pytest.StashKey[bool]()
SERVER_LOG_LINES = 20
_SEVERE = re.compile(r"^(?:[EWF]\d{4} |\S+ [EWF] )|error|traceback", re.IGNORECASE)


def severe_log_lines(text: str, shown: set[str]) -> list[str]:
    """The server's warning and error lines (glog E/W/F prefixes, ISO8601 ` E `/` W `, anything
    saying error or traceback) not shown before; at most the last SERVER_LOG_LINES. A CPU-only
    machine's start-up warnings (server/log.py CPU_ONLY_SIGNS) are left out: `cpu_only_note` says them once."""
    from ..server.log import cpu_only_sign

    lines = [line for line in text.splitlines() if _SEVERE.search(line) and line not in shown
             and not cpu_only_sign(line)]
    return lines[-SERVER_LOG_LINES:]


def cpu_only_note(text: str, config: pytest.Config) -> str | None:
    """The one line that sums up a CPU-only machine's start-up warnings in `text`, the first time
    a run meets them; None after that, or when there are none."""
    from ..server.log import cpu_only_summary

    if config.stash.get(CPU_ONLY_NOTED_KEY, False):
        return None
    note = cpu_only_summary([line for line in text.splitlines() if _SEVERE.search(line)])
    if note:
        config.stash[CPU_ONLY_NOTED_KEY] = True
    return note


def _attach_server_log(item: pytest.Item, report: pytest.TestReport, result: Result) -> None:
    """For a failure the server is involved in (a check using the server whose log has new warnings
    or errors): those lines, once each over the run; nothing for a failure the log cannot explain."""
    target = item.config.stash[RUN_KEY].target
    if target is None or not target.owns_process or "triton" not in getattr(item, "fixturenames", ()):
        return
    shown = item.config.stash.setdefault(SERVER_LOG_KEY, set())
    log = target.server_log(2000) or ""
    lines = severe_log_lines(log, shown)
    if not lines:
        return
    shown.update(lines)
    note = cpu_only_note(log, item.config)
    excerpt = "\n".join(lines + ([f"(note: {note})"] if note else []))
    title = f"tritonserver warnings and errors ({len(lines)} new lines)"
    report.sections.append((title, excerpt))
    result.evidence.append(Evidence(title, excerpt))
