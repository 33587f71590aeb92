"""The pytest plugin: options, public fixtures, the `triton_check` marker and the report hooks.

Public fixtures: `triton_settings`, `triton`, `triton_metrics`, `gpu`, `load`, `faults`,
`triton_facts`, `triton_run` and `check`. Everything heavy (the tritonclient stack, a launched
server) is created only when a check asks for it.
"""

from __future__ import annotations

import inspect
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .facts import FactMissing
from .gate import EXIT_UNREACHABLE, Scope, ScopeItem, exit_code
from .options import OPTIONS
from .recorder import CheckRecorder
from .redaction import RedactingStream, Redactor
from .report.junit import junit_properties
from .report.model import Evidence, Result, Verdict
from .run import Run, now_iso
from .settings import SettingsError, build_settings

RUN_KEY = pytest.StashKey[Run]()
RECORDER_KEY = pytest.StashKey[CheckRecorder]()
REPORT_FILES_KEY = pytest.StashKey[dict]()
REPORT_ERROR_KEY = pytest.StashKey[str]()
PLAN_ONLY_KEY = pytest.StashKey[bool]()

PHASE_OF_PREFIX = {"CFG": "config", "PERF": "performance", "MON": "monitoring", "OPS": "operations",
                   "SEC": "security"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("triton-ready", "triton-ready: production readiness of a Triton Inference Server")
    for option in OPTIONS:
        flag = {"nargs": "?", "const": "true"} if option.flag else {}
        group.addoption(option.cli, dest=option.dest, metavar=option.metavar, default=None, **flag,
                        help=f"{option.help} [env {option.env}; ini {option.ini}; yaml {option.yaml_path}]")
        parser.addini(option.ini, option.help, default=None)
    group.addoption("--triton-config", dest="triton_config", metavar="YAML", default=None,
                    help="YAML settings file (triton-ready.yaml). [env TRITON_READY_CONFIG; ini triton_config]")
    parser.addini("triton_config", "YAML settings file (triton-ready.yaml).", default=None)
    group.addoption("--triton-header", dest="triton_headers", action="append", default=[], metavar="'NAME: VALUE'",
                    help="Extra request header, e.g. for auth; repeatable. Values never appear in any output.")
    group.addoption("--triton-header-env", dest="triton_header_env", action="append", default=[],
                    metavar="NAME=VARIABLE", help="Extra request header whose value is read from an environment "
                    "variable (kept out of the process list); repeatable.")
    group.addoption("--triton-header-file", dest="triton_header_files", action="append", default=[],
                    metavar="NAME=PATH", help="Extra request header whose value is read from a file (e.g. a mounted "
                    "secret); repeatable.")
    group.addoption("--triton-threshold", dest="triton_thresholds", action="append", default=[], metavar="NAME=VALUE",
                    help="Override a named threshold (see README); repeatable.")
    group.addoption("--triton-input-data", dest="triton_input_data", action="append", default=[],
                    metavar="MODEL=FILE", help="Requests to MODEL carry the entries of FILE, a perf_analyzer "
                    "--input-data JSON file (round-robin); repeatable; beside inputs.data in the YAML.")
    group.addoption("--triton-plan", dest="triton_plan", action="store_true", default=False,
                    help="Print the run plan (the server, who owns it, every action that will change or stress "
                         "it) and exit 0 without contacting the server.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "triton_check(id, phase=None, blocking=True, thresholds=None, run_last=False): a readiness check with its "
        "checklist id (CFG-1, PERF-2, ...); phase defaults from the id's prefix; thresholds={name: value} "
        "overrides named thresholds for this check only (highest precedence).",
    )
    cli = {o.dest: config.getoption(o.dest) for o in OPTIONS}
    ini = {o.ini: config.getini(o.ini) for o in OPTIONS}
    ini["triton_config"] = config.getini("triton_config")
    try:
        settings = build_settings(
            cli, ini, config_file=config.getoption("triton_config"),
            cli_headers=config.getoption("triton_headers"), cli_thresholds=config.getoption("triton_thresholds"),
            cli_header_env=config.getoption("triton_header_env"),
            cli_header_files=config.getoption("triton_header_files"),
            cli_input_data=config.getoption("triton_input_data"),
        )
    except SettingsError as exc:
        raise pytest.UsageError(f"triton-ready: {exc}") from None
    from .report import report_dir_problem

    problem = report_dir_problem(settings.readiness_report)
    if problem:  # say so now, not after a long run whose report could not be written
        raise pytest.UsageError(f"triton-ready: --readiness-report from {settings.sources.get('readiness_report')}: "
                                f"{problem}")
    _refuse_parallel_workers(config, settings)
    from .gate import WaiverError, parse_waivers

    try:
        waivers = parse_waivers([w.model_dump() for w in settings.section_model("gate").waivers],
                                str(settings.config_file or "settings"))
    except WaiverError as exc:
        raise pytest.UsageError(f"triton-ready: {exc}") from None
    run = Run(settings)
    run.waivers = waivers
    if settings.redactor():
        config.pluginmanager.register(JunitRedaction(settings.redactor()), "triton-ready-junit-redaction")
    if settings.triton_budget:
        from .estimates import BudgetPlugin

        config.pluginmanager.register(BudgetPlugin(settings, _check_identity, RECORDER_KEY), "triton-ready-budget")
    config.stash[RUN_KEY] = run


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Everything the terminal shows from here on (failure text, tracebacks, `-l` locals, server
    log excerpts) passes through the run's redactor."""
    run = session.config.stash.get(RUN_KEY, None)
    writer = session.config.pluginmanager.get_plugin("terminalreporter")
    if run is None or writer is None:
        return
    redactor = run.settings.redactor()
    terminal = writer._tw
    if redactor and hasattr(terminal, "_file") and not isinstance(terminal._file, RedactingStream):
        terminal._file = RedactingStream(terminal._file, redactor)


class JunitRedaction:
    """Redacts the JUnit XML file once pytest's junitxml plugin has written it: properties,
    failure messages, system-out and system-err."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        path = getattr(session.config.option, "xmlpath", None)
        if path:
            self.redactor.file(Path(path))


def _refuse_parallel_workers(config: pytest.Config, settings) -> None:
    """The checklist is ordered and stateful (later checks use earlier measurements, experiments
    change the server): pytest-xdist workers would each judge a fragment."""
    if not getattr(config.option, "numprocesses", None):
        return
    from .cli import checklist_dir

    runs_checklist = any(str(checklist_dir()) in str(arg) for arg in config.args)
    if runs_checklist or any(source != "default" for source in settings.sources.values()):
        raise pytest.UsageError("triton-ready: the checklist runs in one process, in order (later checks use "
                                "earlier measurements); drop pytest-xdist's -n/--numprocesses")


# -- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def triton_settings(pytestconfig: pytest.Config):
    """The run's typed Settings (URLs, models in scope, SLOs, thresholds, YAML sections)."""
    return pytestconfig.stash[RUN_KEY].settings


@pytest.fixture(scope="session")
def triton(pytestconfig: pytest.Config) -> Iterator:
    """The server under test (a Target): `.client` speaks to it, `.models()` lists the models in
    scope, `.launcher` owns the process when the run launched it. An unreachable server fails
    every check that uses it with one line."""
    from .client import TritonUnreachable
    from .launchers import LaunchError
    from .target import Target

    run = pytestconfig.stash[RUN_KEY]
    if not run.target_error:
        try:
            run.target = Target.open(run.settings)
        except (LaunchError, TritonUnreachable) as exc:
            run.target_error = str(exc)
            run.unreachable = True
    if run.target_error:  # no later check could run: stop here, with one line and its exit code
        pytest.exit(f"triton-ready: {run.target_error}", returncode=EXIT_UNREACHABLE)
    run.context = run.collect_context()
    try:
        yield run.target
    finally:
        run.context = run.collect_context()
        run.target.close()


@pytest.fixture
def triton_metrics(triton):
    """Scrapes the server's Prometheus endpoint: `triton_metrics()` returns a MetricsSnapshot."""
    return triton.scrape_metrics


@pytest.fixture(scope="session")
def gpu(triton):
    """Reads the server's GPUs (a GpuReader): NVML on the same host, else Triton's nv_gpu_* metrics.
    `gpu.read()` is empty with `gpu.unavailable_reason` set when neither works."""
    from .gpu import GpuReader

    return GpuReader.for_target(triton)


@pytest.fixture(scope="session")
def load(triton, gpu):
    """The load engine (a LoadEngine) bound to the server under test; see docs/load-engine.md.

    - `load.open_loop(model | [models] | {model: rate}, rate, poisson=False, window_s=None,
      on_window=None, server_stats=False)` and `load.closed_loop(model, concurrency, ...)` return
      BackgroundTraffic: `with ... as traffic:` runs it in a background thread while the check
      does other things; `traffic.event("name")` marks the timeline; after the block
      `traffic.result` holds `.stats` (count_ok, errors by reason, dropped, p50..p99.9 ms,
      throughput_infer_s), `.timeline` (100 ms bins and events) and `.windows`.
    - `load.measure(model, concurrency=N | rate=R)` runs warm-up and measurement windows until
      stable and valid (thresholds `load_*`), with the server's statistics and GPU readings for
      the same windows: a Measurement with `.stats`, `.stable`, `.valid`, `.problem()`, `.server`.
    """
    from .budget import guard_budget
    from .load import LoadEngine
    from .plan import guard_load

    engine = guard_load(LoadEngine.for_target(triton, gpu_reader=gpu), triton.settings)  # the attach load ceiling
    return guard_budget(engine, triton.settings)  # the run budget (--triton-budget)


@pytest.fixture(scope="session")
def faults(triton, load, triton_settings):
    """The fault injector (a FaultInjector) for the server under test; see docs/faults.md.

    Low-level faults: `faults.kill_stub(model)`, `faults.kill_server()` / `faults.start_server()`,
    `faults.terminate_server()` (SIGTERM), `faults.reload(model)` (a config override: a real
    reload), `faults.unload_and_load(model)`. Experiments under open-loop traffic, each returning
    an Outcome with a 100 ms timeline and its numbers: `forced_reload`, `version_rollout`,
    `instance_restart`, `server_restart`, `graceful_shutdown`. Destructive ones need a server the
    run owns (`faults.owns_process`; else `faults.destructive_unavailable()` says why) and leave
    it ready again before they return. Durations and rate: the YAML section `faults:`.
    """
    from .faults import FaultInjector, FaultPlan

    try:
        plan = FaultPlan.from_section(triton_settings.section_model("faults"))
    except (TypeError, ValueError) as exc:
        where = triton_settings.config_file or "the settings"
        pytest.fail(f"faults settings in {where}: {exc}", pytrace=False)
    return FaultInjector(triton, load, plan, triton_settings.threshold("success_rate_min").value)


@pytest.fixture(scope="session")
def triton_facts(pytestconfig: pytest.Config):
    """The run's typed facts (facts.Facts): results one check leaves for a later one in the same
    run, e.g. PERF-2's highest throughput within SLO per model (`Capacity`), which OPS-2 and the
    soak use. A check publishes a fact (`triton_facts.publish(...)`) and asks for another's by type
    (`get(Kind, model)`, or `require`, which ends the check INCOMPLETE naming the producing check
    when it is missing). Checks run in phase order."""
    return pytestconfig.stash[RUN_KEY].facts


@pytest.fixture(scope="session")
def triton_run(pytestconfig: pytest.Config):
    """The run so far (a Run): its settings, the Results earlier checks recorded, the context the
    report will show. SEC-4 searches these for leaked secrets; checks do not change them."""
    return pytestconfig.stash[RUN_KEY]


@pytest.fixture
def check(request: pytest.FixtureRequest) -> CheckRecorder:
    """The record of the running check: `threshold`, `measure`, `judge`, `judged_since`, `setting`,
    `finding`, `recommend`, `evidence`, `chart`, `not_applicable`, `incomplete`. A missed threshold
    or an error finding fails the check; a check that judged no rule on data measured in this run
    is INCOMPLETE (recorder.py)."""
    recorder = request.node.stash.get(RECORDER_KEY, None)
    if recorder is None:
        pytest.fail("the `check` fixture needs a @pytest.mark.triton_check(...) marker", pytrace=False)
    return recorder


RUN_ORDER = ("config", "monitoring", "performance", "operations", "security")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Take down the checklist in scope before -k/-m deselect from it, leave out the checks a live
    waiver covers, then run checks phase by phase: monitoring reads the server's live values
    before the performance phase loads it to saturation, and operations and security can use the
    performance phase's measurements (capacity, the hot-reload experiment)."""
    run = config.stash[RUN_KEY]
    scope = Scope(_scope_source(config), waivers=run.waivers)
    for item in items:
        identity = _check_identity(item)
        if identity is not None:
            scope.items.append(ScopeItem(item.nodeid, identity[0], getattr(item, "originalname", item.name)))
    run.scope = scope if scope.items else None
    if run.scope is not None:
        by_nodeid = {i.nodeid: i for i in scope.items}
        waived = [item for item in items if item.nodeid in by_nodeid and scope.live_waiver(by_nodeid[item.nodeid])]
        if waived:
            config.hook.pytest_deselected(items=waived)
            items[:] = [item for item in items if item not in waived]
    order = {phase: i for i, phase in enumerate(RUN_ORDER)}

    def rank(item: pytest.Item) -> tuple[int, bool]:
        identity = _check_identity(item)
        if identity is None:
            return -1, False
        # run_last=True: after the rest of its phase (PERF-5 compares what PERF-1..4 measured)
        return order.get(identity[1], len(order)), bool(item.get_closest_marker("triton_check").kwargs.get("run_last"))

    items.sort(key=rank)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if not items:
        return
    run = items[0].config.stash.get(RUN_KEY, None)
    if run is not None and run.scope is not None:
        run.scope.deselected.update(item.nodeid for item in items)


def _scope_source(config: pytest.Config) -> str:
    from .cli import checklist_dir

    packaged = str(checklist_dir())
    args = [str(a) for a in config.args]
    if args and all(a.startswith(packaged) for a in args):
        return "the packaged checklist"
    return "checklist files: " + ", ".join(args or [str(config.rootpath)])


def pytest_collection_finish(session: pytest.Session) -> None:
    """The run plan before the first check (`--triton-plan`: only the plan, then exit 0). SIGTERM
    (what CI sends on cancel) ends the run like Ctrl-C: the report is still written."""
    run = session.config.stash.get(RUN_KEY, None)
    if run is None or run.scope is None:
        return
    _show_plan(session, run)
    if session.config.stash.get(PLAN_ONLY_KEY, False) or threading.current_thread() is not threading.main_thread():
        return
    run.previous_sigterm = signal.signal(signal.SIGTERM, _interrupt_on_sigterm)


def _show_plan(session: pytest.Session, run: Run) -> None:
    """Print what is under test, who owns it and what the checks about to run will do to it."""
    from .estimates import estimate_block
    from .plan import plan_block

    running = {identity[0] for identity in map(_check_identity, session.items) if identity is not None}
    waived = sorted({i.check_id for i in run.scope.items if run.scope.live_waiver(i)})
    text = plan_block(run.settings, running, estimate_lines=estimate_block(run.settings, running))
    if waived:
        text += "\n  waived (gate.waivers), not run: " + ", ".join(waived)
    run.plan = text.splitlines()
    if session.config.getoption("triton_plan", False):
        session.config.stash[PLAN_ONLY_KEY] = True
        text += "\n  --triton-plan: nothing was sent to the server"
    writer = session.config.pluginmanager.get_plugin("terminalreporter")
    if writer is not None:
        writer.write_line("")
        for line in text.splitlines():
            writer.write_line(line)
    else:
        print(text, flush=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """`--triton-plan`: the plan was printed; run no check."""
    return True if session.config.stash.get(PLAN_ONLY_KEY, False) else None


def _interrupt_on_sigterm(signum, frame) -> None:
    raise KeyboardInterrupt("SIGTERM")


# -- turning records into outcomes and results ---------------------------------------------------
def _check_identity(item: pytest.Item) -> tuple[str, str] | None:
    """(check id, phase) from the item's triton_check marker; None for an ordinary test."""
    marker = item.get_closest_marker("triton_check")
    if marker is None:
        return None
    check_id = marker.kwargs.get("id") or (marker.args[0] if marker.args else None)
    if not check_id:
        raise pytest.UsageError(f"{item.nodeid}: triton_check marker needs an id")
    return check_id, marker.kwargs.get("phase") or PHASE_OF_PREFIX.get(check_id.split("-")[0], "other")


def _result_for(item: pytest.Item) -> Result | None:
    identity = _check_identity(item)
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
    from . import progress

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
    machine's start-up warnings (server_log.CPU_ONLY_SIGNS) are left out: `cpu_only_note` says them once."""
    from .server_log import cpu_only_sign

    lines = [line for line in text.splitlines() if _SEVERE.search(line) and line not in shown
             and not cpu_only_sign(line)]
    return lines[-SERVER_LOG_LINES:]


def cpu_only_note(text: str, config: pytest.Config) -> str | None:
    """The one line that sums up a CPU-only machine's start-up warnings in `text`, the first time
    a run meets them; None after that, or when there are none."""
    from .server_log import cpu_only_summary

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
    _record_unreached(run, session.exitstatus)
    run.finished_at = now_iso()
    from .report import write_reports

    session.exitstatus = exit_code(run.verdict(), pytest_status=int(session.exitstatus), unreachable=run.unreachable)
    _junit_suite_properties(session.config, run, session.exitstatus)
    try:
        session.config.stash[REPORT_FILES_KEY] = write_reports(run, run.settings.readiness_report)
    except Exception as exc:  # what was measured is already on screen and, if possible, in the JSON
        session.config.stash[REPORT_ERROR_KEY] = (
            f"could not write the report into {run.settings.readiness_report}: {type(exc).__name__}: {exc}")
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


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
        phase = PHASE_OF_PREFIX.get(item.check_id.split("-")[0], "other")
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
    from .report.terminal import checklist_rows

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
    if writer is not None and config.stash.get(RUN_KEY, None) is not None and not config.stash.get(PLAN_ONLY_KEY,
                                                                                                      False):
        _write_verdict(config, writer)


def _write_verdict(config: pytest.Config, writer) -> None:
    from .report.terminal import OVERALL_MARKUP

    run = config.stash[RUN_KEY]
    if not run.results and run.scope is None:
        return
    verdict = run.verdict()
    writer.write("triton-ready verdict: ")
    writer.write(verdict, **OVERALL_MARKUP.get(verdict, {}))
    writer.line(f" ({run.verdict_reason()})")
