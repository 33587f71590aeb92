"""The wheel carries the checklist and the demo repository, so `triton-ready` works outside a clone."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from conftest import QUICK_CHECKLIST, REPO_ROOT
from pytest_triton_ready.gate import EXIT_CODES


def test_wheel_ships_checklist_and_demo_models(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(tmp_path), str(REPO_ROOT)], check=True)
    wheel = next(tmp_path.glob("pytest_triton_ready-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "pytest_triton_ready/checks/test_config.py" in names
    assert "pytest_triton_ready/checks/test_monitoring.py" in names
    assert "pytest_triton_ready/demo/models/scale/config.pbtxt" in names
    assert "pytest_triton_ready/demo/models/scale/1/model.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "triton_ready = pytest_triton_ready.plugin" in text
    assert "triton-ready = pytest_triton_ready.cli:main" in text


def test_console_script_runs_the_packaged_checklist_from_any_directory(run_checklist, tmp_path):
    endpoints = run_checklist.own_server().endpoints  # the whole checklist reloads and saturates: not the shared server
    result = subprocess.run(
        [sys.executable, "-m", "pytest_triton_ready.cli", f"--triton-url={endpoints.http_url}",
         f"--triton-grpc-url={endpoints.grpc_url}", f"--triton-metrics-url={endpoints.metrics_url}",
         f"--triton-config={QUICK_CHECKLIST}", "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    report = json.loads((tmp_path / "triton-ready-report" / "readiness.json").read_text())
    assert result.returncode == EXIT_CODES[report["verdict"]], result.stdout[-3000:]
    phases = {r["phase"] for r in report["results"]}
    assert {"config", "monitoring", "operations", "security"} <= phases
    assert report["scope"]["source"] == "the packaged checklist"
    assert report["scope"]["ran"] == report["scope"]["in_scope"] == len(report["results"])


def test_help_explains_the_options(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pytest_triton_ready.cli", "--help"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert "triton-ready: production readiness" in result.stdout and "--triton-url=URL" in result.stdout
    assert "TRITON_READY_URL" in result.stdout


def _installed_like_a_wheel(path) -> None:
    """A dist-info on sys.path[0] that lists the package's files, as an installed wheel's RECORD
    does: pytest then marks `pytest_triton_ready` for assertion rewriting by that name (an editable
    install lists no file, which hides the problem)."""
    dist = path / "pytest_triton_ready_wheel-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-triton-ready-wheel\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\ntriton_ready = pytest_triton_ready.plugin\n")
    (dist / "RECORD").write_text("pytest_triton_ready/__init__.py,,\npytest_triton_ready/cli.py,,\n"
                                 "pytest_triton_ready/plugin/__init__.py,,\n")


@pytest.mark.parametrize("entry", [["-m", "pytest_triton_ready.cli"],
                                   ["-c", "import sys; from pytest_triton_ready.cli import main; sys.exit(main())"]],
                         ids=["python -m", "console script"])
def test_the_entry_points_give_no_assertion_rewrite_warning(pytester, entry):
    _installed_like_a_wheel(pytester.path)
    pytester.makepyfile(rewrite_probe="""
        def pytest_sessionstart(session):
            import pytest_triton_ready.plugin as plugin
            print("plugin loader:", type(plugin.__loader__).__name__)
    """)
    result = pytester.run(sys.executable, *entry, "--triton-launch=embedded", "--triton-plan",
                          "-p", "rewrite_probe", "-s", timeout=120)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, output[-2000:]
    assert "triton-ready run plan" in output
    assert "PytestAssertRewriteWarning" not in output and "cannot be rewritten" not in output
    assert "plugin loader: AssertionRewritingHook" in output  # the plugin's own module is still rewritten
