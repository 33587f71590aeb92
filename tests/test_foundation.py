"""The foundation against a real server: a healthy run, a broken model, an unreachable URL, and
no server process left behind."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from conftest import REPO_ROOT, TEST_REPOSITORIES

from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY


def test_healthy_demo_run_passes_every_foundation_check(run_checklist):
    run = run_checklist("test_config.py", "test_monitoring.py::test_metrics_endpoint_reachable_and_moving")
    run.outcome.assert_outcomes(passed=4)
    report = run.report
    assert report["verdict"] == "READY"
    assert report["context"]["server"]["version"].startswith("2.")
    assert {m["name"] for m in report["context"]["models"]} == {"scale", "cached_sum", "accumulate"}
    moving = run.result("test_metrics_endpoint_reachable_and_moving")
    rise = [m for m in moving["measurements"] if m["name"].startswith("nv_inference_request_success rise")]
    assert rise and rise[0]["value"] >= 1 and rise[0]["passed"] is True
