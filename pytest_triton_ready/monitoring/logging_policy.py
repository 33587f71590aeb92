"""Is the server's logging fit for aggregation? Judged from GET /v2/logging and the YAML's
`monitoring.log_shipping` (collector, whether stdout is collected, which log files are shipped)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ISO8601 = "ISO8601"
# Triton's ISO8601 log line: "2024-05-01T12:00:00Z I 1234 file.cc:42] message"
ISO8601_LINE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})\s")


@dataclass(frozen=True)
class LogProblem:
    message: str
    fix: str
    severity: str = "error"


@dataclass
class LogVerdict:
    destination: str
    problems: list[LogProblem] = field(default_factory=list)


def judge_logging(settings: dict[str, Any], shipping: dict[str, Any]) -> LogVerdict:
    """Compare /v2/logging's answer with the production rules; each problem says what to change."""
    log_file = str(settings.get("log_file") or "")
    verdict = LogVerdict(log_file or "stdout/stderr")
    problems = verdict.problems
    verbose = int(settings.get("log_verbose_level", 0) or 0)
    if verbose != 0:
        problems.append(LogProblem(
            f"log_verbose_level is {verbose}: verbose logging floods the aggregator and slows the server",
            "start tritonserver with --log-verbose=0 (or POST /v2/logging {\"log_verbose_level\": 0})"))
    for level in ("info", "warning", "error"):
        if settings.get(f"log_{level}") is not True:
            problems.append(LogProblem(
                f"log_{level} is {settings.get(f'log_{level}')!r}: {level} messages never reach the aggregator",
                f"start tritonserver with --log-{level}=true"))
    log_format = str(settings.get("log_format", ""))
    if log_format != ISO8601:
        problems.append(LogProblem(
            f"log_format is {log_format!r}: its timestamps carry no date or time zone, so an aggregator "
            "cannot order or parse them",
            "start tritonserver with --log-format=ISO8601"))
    collected_stdout = shipping.get("stdout")
    shipped_files = [str(f) for f in shipping.get("files") or []]
    if log_file:
        if log_file not in shipped_files:
            problems.append(LogProblem(
                f"the server logs to {log_file}, which monitoring.log_shipping.files does not declare shipped",
                f"add {log_file} to monitoring.log_shipping.files once the collector tails it, "
                "or log to stdout (--log-file unset)"))
    elif collected_stdout is False:
        problems.append(LogProblem(
            "the server logs to stdout/stderr, but monitoring.log_shipping.stdout is false: nothing collects it",
            "let the collector read the container's stdout, or log to a shipped file (--log-file)"))
    elif not shipping:
        problems.append(LogProblem(
            "the server logs to stdout/stderr and no monitoring.log_shipping is declared: the report assumes "
            "the platform collects container stdout",
            "declare monitoring.log_shipping {collector: ..., stdout: true} in the YAML", severity="warning"))
    return verdict


def non_iso8601_lines(lines: list[str]) -> list[str]:
    """Log lines that do not start with an ISO8601 timestamp (continuation lines of tables excluded)."""
    return [ln for ln in lines if ln.strip() and not ln.startswith(("+", "|", " ")) and not ISO8601_LINE.match(ln)]
