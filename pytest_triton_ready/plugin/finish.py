"""The end of the run: the checks never reached recorded INCOMPLETE, readiness.json/.md/.html
written, the exit code made the verdict's, the JUnit suite properties, the checklist table on the
terminal and the verdict as the last line. A session that ran no check (`--collect-only`, a `-k`
that selects nothing, a stop before the first check) leaves an existing report as it was."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from ..duration import now_iso
from ..gate import exit_code
from ..record.model import Result, Verdict, phase_of
from ..run import Run
from .state import PLAN_ONLY_KEY, REPORT_ERROR_KEY, REPORT_FILES_KEY, REPORT_KEPT_KEY, RUN_KEY


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write readiness.json, readiness.md and readiness.html once every check has run (or the run
    was stopped: the checks it never reached are INCOMPLETE), and make the exit code the verdict's."""
    run = session.config.stash.get(RUN_KEY, None)
    if run is None or (not run.results and run.scope is None):
        return
    if session.config.stash.get(PLAN_ONLY_KEY, False):
        session.exitstatus = pytest.ExitCode.OK
        return
    _restore_sigterm(run)
    if ran_nothing(run, collect_only=session.config.option.collectonly) and _has_report(run.settings.readiness_report):
        session.config.stash[REPORT_KEPT_KEY] = str(run.settings.readiness_report)
        return
    _record_unreached(run, session.exitstatus)
    run.finished_at = now_iso()
    from ..report import write_reports

    session.exitstatus = exit_code(run.verdict(), pytest_status=int(session.exitstatus), unreachable=run.unreachable)
    _junit_suite_properties(session.config, run, session.exitstatus)
    try:
        session.config.stash[REPORT_FILES_KEY] = write_reports(run, run.settings.readiness_report)
    except Exception as exc:  # what was measured is already on screen and, if possible, in the JSON
        session.config.stash[REPORT_ERROR_KEY] = (
            f"could not write the report into {run.settings.readiness_report}: {type(exc).__name__}: {exc}")
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def ran_nothing(run: Run, collect_only: bool) -> bool:
    """The session judged nothing: only listed the checks, or ran none of them, with no target or
    collection error to report instead."""
    return collect_only or not (run.results or run.target_error or run.collection_errors)


def _has_report(directory) -> bool:
    return (Path(directory) / "readiness.json").exists()


def _restore_sigterm(run: Run) -> None:
    if run.previous_sigterm is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, run.previous_sigterm)
        run.previous_sigterm = None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    run = collector.config.stash.get(RUN_KEY, None)
    if report.failed and run is not None:
        run.collection_errors.append(report.nodeid or "the checklist")
    return report


def _record_unreached(run: Run, exitstatus: int) -> None:
    """Checks in scope that were selected but never reached get an INCOMPLETE result saying why."""
    if run.scope is None:
        return
    if run.target_error:
        why = f"not run: {run.target_error}"
    elif run.collection_errors:
        why = f"not run: checklist files failed to import: {', '.join(run.collection_errors)}"
    elif exitstatus == pytest.ExitCode.INTERRUPTED:
        why = "not run: the run was interrupted (Ctrl-C or SIGTERM)"
    else:
        why = "not run: the session ended before this check"
    for item in run.scope.not_run(run.recorded()):
        if item.nodeid in run.scope.deselected:
            continue
        phase = phase_of(item.check_id)
        run.results.append(Result(item.check_id, phase, item.name, item.nodeid, Verdict.INCOMPLETE, reason=why))


def _junit_suite_properties(config: pytest.Config, run: Run, code: int) -> None:
    """The overall verdict as properties of the JUnit testsuite, for CI systems that read only the XML."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pytest moved it; the per-testcase properties still carry everything
        return
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    xml.add_global_property("triton_ready_verdict", run.verdict())
    xml.add_global_property("triton_ready_verdict_reason", run.verdict_reason())
    xml.add_global_property("triton_ready_exit_code", str(code))
    xml.add_global_property("triton_ready_report", str(run.settings.readiness_report))
    if run.scope is not None:
        scope = run.scope.to_dict(run.recorded())
        xml.add_global_property("triton_ready_scope", f"{scope['ran']} of {scope['in_scope']} checks ran "
                                                      f"({scope['source']})")
        for entry in scope["not_run"]:
            xml.add_global_property("triton_ready_not_run", f"{entry['check_id']} {entry['nodeid']} ({entry['why']})")
        for entry in scope["waived"]:
            xml.add_global_property("triton_ready_waived", f"{entry['check_id']} {entry['nodeid']}: {entry['reason']} "
                                                           f"(owner {entry['owner']}, expires {entry['expires']})")


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """A compact checklist table: one row per check, its verdict, and what decided it; then what
    did not run, the report's files and the verdict. An unreachable server gets its one line only."""
    run = config.stash.get(RUN_KEY, None)
    if run is None or (not run.results and run.scope is None) or config.stash.get(PLAN_ONLY_KEY, False):
        return
    kept = config.stash.get(REPORT_KEPT_KEY, None)
    if kept:
        terminalreporter.line(f"triton-ready: no check ran; the report in {kept} was left as it was")
        return
    from ..report.terminal import checklist_rows

    writer = terminalreporter
    if not run.unreachable:
        writer.section("triton-ready checklist")
        for row in checklist_rows(run.results, writer._tw.fullwidth):
            writer.write(row.head)
            writer.write(row.verdict if row.tail else row.verdict.rstrip(), **row.markup)
            writer.line(row.tail.rstrip())
            if row.why:
                writer.line(row.why)
        if any(not r.blocking for r in run.results):
            writer.line("* advisory: shown, but does not decide the verdict")
        _write_scope(writer, run)
    files = config.stash.get(REPORT_FILES_KEY, None)
    if files:
        writer.line(f"report: {files['html']} (also {files['json'].name}, {files['md'].name})")
    error = config.stash.get(REPORT_ERROR_KEY, None)
    if error:
        writer.line(f"triton-ready: {error}", red=True)
    _write_verdict(config, writer)


def _write_scope(writer, run: Run) -> None:
    if run.scope is None:
        return
    scope = run.scope.to_dict(run.recorded())
    if scope["not_run"]:
        ids = sorted({e["check_id"] for e in scope["not_run"]})
        writer.line(f"not run: {len(scope['not_run'])} of {scope['in_scope']} checks in scope "
                    f"({', '.join(ids)}); only a waiver (gate.waivers) leaves a check out", yellow=True)
    for entry in scope["waived"]:
        writer.line(f"waived: {entry['check_id']} {entry['name']}: {entry['reason']} "
                    f"(owner {entry['owner']}, expires {entry['expires']})")
    for entry in scope["expired_waivers"]:
        writer.line(f"expired waiver: {entry['check']} (owner {entry['owner']}, expired {entry['expires']})", red=True)
    for entry in scope["unused_waivers"]:
        writer.line(f"waiver matches no check in scope: {entry['check']}", yellow=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Repeat the verdict as the very last line of the run's output, after pytest's own summary."""
    writer = config.pluginmanager.get_plugin("terminalreporter")
    if (writer is not None and config.stash.get(RUN_KEY, None) is not None and not config.stash.get(PLAN_ONLY_KEY, False)
            and not config.stash.get(REPORT_KEPT_KEY, None)):
        _write_verdict(config, writer)


def _write_verdict(config: pytest.Config, writer) -> None:
    from ..report.terminal import OVERALL_MARKUP

    run = config.stash[RUN_KEY]
    if not run.results and run.scope is None:
        return
    verdict = run.verdict()
    writer.write("triton-ready verdict: ")
    writer.write(verdict, **OVERALL_MARKUP.get(verdict, {}))
    writer.line(f" ({run.verdict_reason()})")
