"""The pytest plugin (the `pytest11` entry point): options, the `triton_check` marker, the settings
and the run built at configure time, and the redaction of everything the terminal and JUnit show.

The rest of the plugin is registered from here (`pytest_plugins`): the public fixtures
(plugin/fixtures.py: `triton_settings`, `triton`, `triton_metrics`, `gpu`, `load`, `faults`,
`triton_facts`, `triton_run`, `check`), collection and the run plan (plugin/collection.py), each
check's outcome and Result (plugin/results.py), and the reports and verdict at the end
(plugin/finish.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..redaction import RedactingStream, Redactor
from ..run import Run
from ..settings import SettingsError, build_settings
from ..settings.options import OPTIONS
from .state import RECORDER_KEY, RUN_KEY, check_identity

pytest_plugins = ["pytest_triton_ready.plugin.fixtures", "pytest_triton_ready.plugin.collection",
                  "pytest_triton_ready.plugin.results", "pytest_triton_ready.plugin.finish"]


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
    from ..report import report_dir_problem

    problem = report_dir_problem(settings.readiness_report)
    if problem:  # say so now, not after a long run whose report could not be written
        raise pytest.UsageError(f"triton-ready: --readiness-report from {settings.sources.get('readiness_report')}: "
                                f"{problem}")
    _refuse_parallel_workers(config, settings)
    from ..gate import WaiverError, parse_waivers

    try:
        waivers = parse_waivers([w.model_dump() for w in settings.section_model("gate").waivers],
                                str(settings.config_file or "settings"))
    except WaiverError as exc:
        raise pytest.UsageError(f"triton-ready: {exc}") from None
    run = Run(settings)
    run.waivers = waivers
    if settings.triton_deployment is not None:  # an invalid manifest stops the run before any check
        from ..deployment.manifest import read_manifest
        from ..deployment.reading import DeploymentError

        try:
            run.deployment = read_manifest(settings.triton_deployment, settings.triton_kubernetes_version)
        except DeploymentError as exc:
            raise pytest.UsageError(f"triton-ready: --triton-deployment from "
                                    f"{settings.origins.get('triton_deployment')}: {exc}") from None
    if settings.redactor():
        config.pluginmanager.register(JunitRedaction(settings.redactor()), "triton-ready-junit-redaction")
    if settings.triton_budget:
        from ..estimates import BudgetPlugin

        config.pluginmanager.register(BudgetPlugin(settings, check_identity, RECORDER_KEY), "triton-ready-budget")
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
    from ..cli import checklist_dir

    runs_checklist = any(str(checklist_dir()) in str(arg) for arg in config.args)
    if runs_checklist or any(source != "default" for source in settings.sources.values()):
        raise pytest.UsageError("triton-ready: the checklist runs in one process, in order (later checks use "
                                "earlier measurements); drop pytest-xdist's -n/--numprocesses")
