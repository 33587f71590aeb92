"""Shared fixtures of the plugin's own tests: one real embedded Triton for the session, and a
helper that runs checklist files through pytester against it and returns the readiness report.

Two layers: unit tests (no server, seconds) and server tests, marked `server`, that start or use a
real tritonserver, Prometheus, Chromium, Docker or a subprocess run of the checklist. The mark is
given here from the fixtures a test uses, plus the tests listed in SERVER_TESTS that start one
themselves. Run the fast layer alone with `pytest -m "not server"`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
# Imported once for the whole session: pytester's in-process runs drop modules they import, and a
# second import of ml_dtypes (under tritonclient) or of generated protobuf modules fails.
import tritonclient.grpc.model_config_pb2  # noqa: F401
import tritonclient.http  # noqa: F401

from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY, EmbeddedLauncher

# Fixtures that start or reach a real server, Prometheus, a browser, Docker or a pytest subprocess.
SERVER_FIXTURES = frozenset({
    "demo_server", "run_checklist", "pytester", "load_server", "engine", "canary_server", "broken_server",
    "production_server", "prometheus_binary", "browser", "container_settings", "evidence", "pytriton_wheel",
    "h200_endpoint", "h200_checklist",
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
})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "server: starts or uses a real tritonserver, Prometheus, Chromium, Docker "
                                       "or a subprocess run of the checklist (deselect with -m 'not server')")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", item.name)
        if name in SERVER_TESTS or SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)


REPO_ROOT = Path(__file__).resolve().parent.parent
CHECKS = REPO_ROOT / "checks"
TEST_REPOSITORIES = Path(__file__).resolve().parent / "repositories"
QUICK_CHECKLIST = Path(__file__).resolve().parent / "data" / "quick-checklist.yaml"  # seconds, not minutes


@pytest.fixture(scope="session")
def demo_server():
    """A real tritonserver on the packaged demo repository, shared by the whole test session."""
    launcher = EmbeddedLauncher(DEMO_REPOSITORY)
    launcher.start()
    yield launcher
    launcher.cleanup()


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
def run_checklist(pytester: pytest.Pytester, demo_server):
    """Run checklist files (names under checks/, or paths) with pytester, by default against the
    shared demo server; pass `url=None` plus launcher options to let the run start its own.
    Runs go to a subprocess by default: tritonclient's numpy extensions do not survive the
    re-import an in-process run triggers."""

    def run(*files: str, args: tuple[str, ...] = (), url: str | None = "demo", subprocess: bool = True) -> ChecklistRun:
        paths = [str(CHECKS / f) if not Path(f).is_absolute() else f for f in files] or [str(CHECKS)]
        options = list(args)
        if url == "demo":
            endpoints = demo_server.endpoints
            options += [f"--triton-url={endpoints.http_url}", f"--triton-grpc-url={endpoints.grpc_url}",
                        f"--triton-metrics-url={endpoints.metrics_url}"]
        elif url:
            options.append(f"--triton-url={url}")
        report_dir = pytester.path / "report"
        options += [f"--readiness-report={report_dir}", "-p", "no:cacheprovider"]
        runner = pytester.runpytest_subprocess if subprocess else pytester.runpytest
        return ChecklistRun(runner(*paths, *options), report_dir)

    return run
