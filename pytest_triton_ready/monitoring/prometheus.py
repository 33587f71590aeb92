"""A real Prometheus on loopback: scrapes one metrics URL, loads rule files, answers queries.

It runs from a generated configuration, on a free port, with its own temporary storage, in its own
process group (launchers.process), and is stopped with the whole group.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from ..errors import TritonReadyError
from ..launchers.process import end_group, free_port, spawn
from ..server.client import http_status

JOB = "triton"


class PrometheusError(TritonReadyError, RuntimeError):
    """Prometheus could not start, or did not answer as expected; the message says which."""


def find_prometheus(configured: str | None = None) -> str | None:
    """The prometheus binary: the configured path, else prometheus on PATH; None when absent."""
    if configured:
        return configured if Path(configured).is_file() else None
    return shutil.which("prometheus")


class PrometheusRunner:
    """Start with `start()` (or `with`), query with `query()`, stop with `stop()`."""

    def __init__(self, binary: str, scrape_url: str, rule_files: Sequence[Path] = (),
                 interval_s: float = 1.0, startup_timeout_s: float = 30.0) -> None:
        self.binary = binary
        self.scrape_url = scrape_url
        self.rule_files = [Path(f).resolve() for f in rule_files]
        self.interval_s = interval_s
        self.startup_timeout_s = startup_timeout_s
        self.port = free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="triton-ready-prometheus-"))
        self.process = None
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    def config(self) -> dict[str, Any]:
        parts = urllib.parse.urlsplit(self.scrape_url)
        interval = f"{int(self.interval_s * 1000)}ms"
        return {
            "global": {"scrape_interval": interval, "evaluation_interval": interval,
                       "scrape_timeout": interval},
            "rule_files": [str(f) for f in self.rule_files],
            "scrape_configs": [{
                "job_name": JOB,
                "scheme": parts.scheme or "http",
                "metrics_path": parts.path or "/metrics",
                "static_configs": [{"targets": [parts.netloc]}],
            }],
        }

    def command(self) -> list[str]:
        return [
            self.binary,
            f"--config.file={self.workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
        ]

    def start(self) -> PrometheusRunner:
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(self.config(), sort_keys=False))
        self._log = open(self.log_path, "ab")
        self.process = spawn(self.command(), dict(os.environ), self._log)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise PrometheusError(f"prometheus exited with code {self.process.returncode} at start-up: "
                                      f"{self.log_tail(3)}")
            if self._status("/-/ready") == 200:
                return self
            time.sleep(0.2)
        self.stop()
        raise PrometheusError(f"prometheus was not ready within {self.startup_timeout_s:.0f} s")

    def stop(self) -> None:
        if self.process is not None:
            end_group(self.process, grace_s=10)
            self.process = None
        if self._log:
            self._log.close()
            self._log = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> PrometheusRunner:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.cleanup()

    # -- HTTP API -------------------------------------------------------------------------------
    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the `data` of the answer, or PrometheusError with Prometheus's error."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read())
            except ValueError:
                raise PrometheusError(f"prometheus answered HTTP {exc.code} to {path}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise PrometheusError(f"prometheus at {self.url} did not answer: {exc}") from None
        if body.get("status") != "success":
            raise PrometheusError(f"{body.get('errorType', 'error')}: {body.get('error', 'unknown error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Evaluate an instant query now; the series it returns (each {metric, value})."""
        data = self.api("query", query=expr)
        result = data.get("result")
        return result if isinstance(result, list) else []

    def target_health(self) -> dict[str, Any]:
        """The scrape target's health, last error and last scrape time."""
        active = self.api("targets").get("activeTargets", [])
        return active[0] if active else {}

    def rule_groups(self) -> list[dict[str, Any]]:
        return self.api("rules").get("groups", [])

    def wait_until_evaluated(self, scrapes: int = 3, timeout_s: float = 30.0) -> None:
        """Wait until the target was scraped `scrapes` times and every rule group evaluated after it,
        so that rate() has two points and recording rules have written their series."""
        deadline = time.monotonic() + timeout_s
        query = f'count_over_time(up{{job="{JOB}"}}[5m])'
        while time.monotonic() < deadline:
            samples = self.query(query)
            if samples and float(samples[0]["value"][1]) >= scrapes:
                self._wait_for_rule_evaluation(after=time.time(), deadline=deadline)
                health = self.target_health()
                if health.get("health") != "up":
                    raise PrometheusError(f"prometheus cannot scrape {self.scrape_url}: "
                                          f"{health.get('lastError') or health.get('health', 'unknown')}")
                return
            time.sleep(self.interval_s / 2)
        health = self.target_health()
        raise PrometheusError(f"prometheus did not scrape {self.scrape_url} {scrapes} times within {timeout_s:.0f} s"
                              f" (target {health.get('health', 'unknown')}: {health.get('lastError') or 'no error'})")

    def _wait_for_rule_evaluation(self, after: float, deadline: float) -> None:
        """Until every rule group has been evaluated once after `after` (epoch seconds)."""
        while time.monotonic() < deadline:
            groups = self.rule_groups()
            if all(_epoch(g.get("lastEvaluation")) > after for g in groups):
                return
            time.sleep(self.interval_s / 4)
        raise PrometheusError("prometheus did not evaluate every rule group in time")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _status(self, path: str) -> int | None:
        return http_status(self.url + path, timeout_s=2)


def _epoch(rfc3339: str | None) -> float:
    """Prometheus's RFC 3339 time (nanosecond fraction allowed) in epoch seconds; 0 when absent."""
    if not rfc3339:
        return 0.0
    text = re.sub(r"(\.\d{6})\d+", r"\1", rfc3339).replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0
