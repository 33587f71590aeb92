"""Shared fixtures of the plugin's own tests: one real embedded Triton for the session, and a
helper that runs checklist files through pytester against it and returns the readiness report.

Two layers: unit tests (no server, seconds) and server tests, marked `server`, that start or use a
real tritonserver, Prometheus, Chromium, Docker or a subprocess run of the checklist. The mark is
given here from the fixtures a test uses, plus the tests listed in SERVER_TESTS that start one
themselves. Run the fast layer alone with `pytest -m "not server"`.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Imported once for the whole session: pytester's in-process runs drop modules they import, and a
# second import of ml_dtypes (under tritonclient) or of generated protobuf modules fails.
import tritonclient.grpc.model_config_pb2  # noqa: F401
import tritonclient.http  # noqa: F401
from container_engine import container_engine  # noqa: F401  (a real container engine, session-scoped)
from reruns import (  # noqa: F401  (hooks: reruns for server tests only, counted in the summary)
    give_server_tests_reruns,
    pytest_addoption,
    pytest_runtest_logreport,
    pytest_sessionfinish,
)
from reruns import (
    pytest_terminal_summary as rerun_summary,
)
from shared_server import SharedDemoServer

from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY, EmbeddedLauncher

# Fixtures that start or reach a real server, Prometheus, a browser, Docker or a pytest subprocess.
SERVER_FIXTURES = frozenset({
    "demo_server", "run_checklist", "pytester", "load_server", "engine", "canary_server", "broken_server",
    "production_server", "prometheus_binary", "browser", "container_settings", "evidence", "pytriton_wheel",
    "h200_endpoint", "h200_checklist", "container_engine", "subprocess_checklist",
})
# Tests that start a server, a subprocess of the project or a pip build on their own.
SERVER_TESTS = frozenset({
    "test_runner_killed_outright_takes_the_server_down_with_it",
    "test_launcher_lifecycle_kill_stub_restart_stop_and_removal",
    "test_a_server_that_exits_at_start_up_is_reported_in_one_line_and_removed",
    "test_without_a_docker_engine_start_fails_with_one_line",
    "test_wheel_ships_checklist_and_demo_models",
    "test_help_explains_the_options",
    "test_wheel_ships_the_schema_and_templates",
    "test_report_cli_names_the_file_and_cause_of_bad_input",
    "test_script_installs_carried_wheels_and_passes_extra_arguments",
    "test_script_setup_errors_are_one_line_and_exit_3",
    "test_gpu_kind_is_refused_where_no_gpu_can_run_the_models",
    "test_start_up_settles_fast_serves_the_good_model_and_names_the_failed_ones",
    "test_a_server_started_from_any_thread_ends_when_the_runner_is_killed",
    "test_a_failed_start_leaves_no_group_log_handle_or_working_directory",
    "test_declared_command_failure_and_timeout_are_clear",
    "test_an_unreachable_server_is_one_line_its_exit_code_and_a_report",
    "test_an_invalid_manifest_stops_the_run_with_one_line_and_exit_code_4",
})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "server: starts or uses a real tritonserver, Prometheus, Chromium, Docker "
                                       "or a subprocess run of the checklist (deselect with -m 'not server')")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", item.name)
        if name in SERVER_TESTS or SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)
    give_server_tests_reruns(config, items)


REPO_ROOT = Path(__file__).resolve().parent.parent
CHECKS = REPO_ROOT / "checks"
TEST_REPOSITORIES = Path(__file__).resolve().parent / "repositories"
SHARED_DEMO_KEY = pytest.StashKey[SharedDemoServer]()
QUICK_CHECKLIST = Path(__file__).resolve().parent / "data" / "quick-checklist.yaml"  # seconds, not minutes


def artifact_dir() -> Path:
    """Where tests keep what a person may want to look at afterwards (screenshots, server logs):
    TRITON_READY_ARTIFACTS, else triton-ready-report/test-artifacts in the clone."""
    directory = Path(os.environ.get("TRITON_READY_ARTIFACTS") or REPO_ROOT / "triton-ready-report" / "test-artifacts")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture(scope="session")
def shared_demo(pytestconfig):
    """The session's shared demo server and the record of any that died (logs in artifact_dir())."""
    log_dir = artifact_dir() / "shared-demo-server"
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    holder = SharedDemoServer(log_dir)
    pytestconfig.stash[SHARED_DEMO_KEY] = holder
    yield holder
    holder.close()


@pytest.fixture
def demo_server(shared_demo, request):
    """A real tritonserver on the packaged demo repository, shared by the session's tests.

    Checked live before the test (a dead one is replaced, and why it died is printed and kept);
    after the test it must still be live with every model in the state and config it started
    with: a test that kills or changes it fails here, naming what changed."""
    cause = shared_demo.dead_because()
    if cause:
        print(shared_demo.replace(cause, during=f"the tests before {request.node.nodeid}"))
    launcher = shared_demo.current()
    yield launcher
    cause = shared_demo.dead_because()
    if cause:
        pytest.fail(shared_demo.replace(cause, during=request.node.nodeid), pytrace=False)
    changed = shared_demo.changes()
    if changed:
        shared_demo.replace("left changed by the test", during=request.node.nodeid)
        pytest.fail("the test left the shared demo server changed (it was replaced): " + "; ".join(changed),
                    pytrace=False)


def pytest_terminal_summary(terminalreporter):
    """Count the reruns, then name every shared-server death of the session at the end, where
    nobody can miss it."""
    rerun_summary(terminalreporter)
    holder = terminalreporter.config.stash.get(SHARED_DEMO_KEY, None)
    if holder is not None and holder.deaths:
        terminalreporter.section("shared demo server deaths")
        for story in holder.deaths:
            terminalreporter.line(story)


@dataclass
class ChecklistRun:
    """What one pytester run of checklist files produced."""

    outcome: pytest.RunResult
    report_dir: Path

    @property
    def report(self) -> dict[str, Any]:
        """readiness.json, checked against the JSON Schema the package ships."""
        from pytest_triton_ready.report.schema import schema_errors

        document = json.loads((self.report_dir / "readiness.json").read_text())
        errors = schema_errors(document)
        assert not errors, "readiness.json does not match the schema:\n" + "\n".join(errors)
        return document

    def result(self, test_name: str) -> dict[str, Any]:
        """The recorded Result of the check function `test_name`."""
        for result in self.report["results"]:
            if result["nodeid"].split("::")[-1].split("[")[0] == test_name:
                return result
        raise AssertionError(f"no result recorded for {test_name}")


@pytest.fixture
def run_checklist(pytester: pytest.Pytester, demo_server, request: pytest.FixtureRequest):
    """Run checklist files (names under checks/, or paths) with pytester, by default against the
    shared demo server. `url="own"`: against a demo server of this test's own, for runs that
    reload models, saturate the server or send oversize payloads (the shared server must stay as
    every other test expects it); `url=None` plus launcher options: the run starts its own.
    Runs go to a subprocess by default: tritonclient's numpy extensions do not survive the
    re-import an in-process run triggers."""
    own: list[EmbeddedLauncher] = []

    def own_server() -> EmbeddedLauncher:
        if not own:
            launcher = EmbeddedLauncher(DEMO_REPOSITORY)
            request.addfinalizer(launcher.cleanup)
            launcher.start()
            own.append(launcher)
        return own[0]

    def run(*files: str, args: tuple[str, ...] = (), url: str | None = "demo", subprocess: bool = True,
            allow: str | None = "reload,faults,saturate,large_payloads") -> ChecklistRun:
        paths = [str(CHECKS / f) if not Path(f).is_absolute() else f for f in files] or [str(CHECKS)]
        options = list(args)
        if url in ("demo", "own"):
            endpoints = (demo_server if url == "demo" else own_server()).endpoints
            options += [f"--triton-url={endpoints.http_url}", f"--triton-grpc-url={endpoints.grpc_url}",
                        f"--triton-metrics-url={endpoints.metrics_url}"]
            if allow:  # attached only to save start-ups; `demo_server` verifies the shared one is left as found
                options.append(f"--triton-allow={allow}")
        elif url:
            options.append(f"--triton-url={url}")
        report_dir = pytester.path / "report"
        options += [f"--readiness-report={report_dir}", "-p", "no:cacheprovider"]
        runner = pytester.runpytest_subprocess if subprocess else pytester.runpytest
        return ChecklistRun(runner(*paths, *options), report_dir)

    run.own_server = own_server
    return run


def assert_no_horizontal_scroll(browser, width: int = 1280) -> None:
    """At `width` px the loaded page has no horizontal scrollbar: its scroll width fits the window
    (less a vertical scrollbar). A failure names the elements that reach past the right edge."""
    browser.set_window_size(width, 900)
    scroll, client, inner = browser.execute_script(
        "const e = document.documentElement; return [e.scrollWidth, e.clientWidth, window.innerWidth]")
    if scroll <= client <= inner:
        return
    wide = browser.execute_script("""
        const edge = document.documentElement.clientWidth, out = [];
        for (const el of document.querySelectorAll('body *')) {
          const box = el.getBoundingClientRect();
          if (box.right > edge + 0.5 && !(el.parentElement && el.parentElement.getBoundingClientRect().right > edge + 0.5))
            out.push(`${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''} to ${Math.round(box.right)} px: `
                     + (el.textContent || '').trim().slice(0, 60));
        }
        return out.slice(0, 5);""")
    raise AssertionError(f"horizontal scrollbar at {width} px: the page is {scroll} px wide, the window shows "
                         f"{client} px; too wide: {wide}")


CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,900")


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """A real headless Chromium, driven through chromedriver by selenium, with a fresh profile; None
    where Chromium is not installed (.ci/run installs it): a test then checks every other format
    and skips its browser part at the end, with the reason."""
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_path):
        yield None
        return
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingOptions", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
