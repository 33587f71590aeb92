"""Prometheus rule files: read them (with the line of each rule), and validate them with promtool,
or with the PromQL parser and the rule-file structure where promtool is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import promql_parser
import yaml

from ..errors import TritonReadyError
from .promql import PromQLError, referenced_metrics


@dataclass
class PrometheusRule:
    """One alerting or recording rule, where it was written, and the metrics it reads."""

    file: Path
    line: int
    group: str
    expr: str
    alert: str | None = None
    record: str | None = None
    for_: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=list)
    parse_error: str | None = None

    @property
    def name(self) -> str:
        return self.alert or self.record or "<unnamed>"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def kind(self) -> str:
        return "alert" if self.alert else "recording rule"


@dataclass
class RuleFile:
    path: Path
    rules: list[PrometheusRule] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # each one readable line: file:line: what
    validator: str = ""


class RuleFileError(TritonReadyError, ValueError):
    """A rule file that cannot be read at all."""


def load_rule_file(path: Path) -> RuleFile:
    """Read a Prometheus rule file: groups -> rules, each with its line number and metrics."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleFileError(f"{path}: cannot read the rule file: {exc.strerror}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        line = f":{exc.problem_mark.line + 1}" if exc.problem_mark else ""
        raise RuleFileError(f"{path}{line}: not valid YAML: {exc.problem}") from None
    result = RuleFile(Path(path))
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        result.problems.append(f"{path}:1: a rule file needs a top-level 'groups:' list")
        return result
    group_nodes = _value_node(root, "groups").value
    for group, group_node in zip(data["groups"], group_nodes, strict=False):
        rules = (group or {}).get("rules") or []
        rule_nodes = _value_node(group_node, "rules")
        rule_nodes = rule_nodes.value if isinstance(rule_nodes, yaml.SequenceNode) else []
        for raw, node in zip(rules, rule_nodes, strict=False):
            result.rules.append(_rule(Path(path), node.start_mark.line + 1, str(group.get("name", "")), raw))
    return result


def _value_node(mapping: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(mapping, yaml.MappingNode):
        for key_node, value_node in mapping.value:
            if key_node.value == key:
                return value_node
    return None


def _rule(path: Path, line: int, group: str, raw: dict) -> PrometheusRule:
    raw = raw if isinstance(raw, dict) else {}
    rule = PrometheusRule(path, line, group, str(raw.get("expr", "")), raw.get("alert"), raw.get("record"),
                None if raw.get("for") is None else str(raw.get("for")),
                {str(k): str(v) for k, v in (raw.get("labels") or {}).items()})
    try:
        rule.metrics = referenced_metrics(rule.expr)
    except PromQLError as exc:
        rule.parse_error = str(exc)
    return rule


# -- validation -------------------------------------------------------------------------------
def find_promtool(configured: str | None = None) -> str | None:
    """The promtool binary: the configured path, else promtool on PATH; None when absent."""
    if configured:
        return configured if Path(configured).is_file() else None
    return shutil.which("promtool")


def validate(rule_file: RuleFile, promtool: str | None) -> RuleFile:
    """Add every syntax problem to `rule_file.problems`, with promtool when there is one."""
    if promtool:
        rule_file.validator = f"promtool check rules ({_promtool_version(promtool)})"
        rule_file.problems.extend(_promtool_problems(promtool, rule_file.path))
    else:
        rule_file.validator = f"promql-parser {_package_version('promql-parser')} (promtool not installed)"
        rule_file.problems.extend(_parser_problems(rule_file))
    return rule_file


def _promtool_problems(promtool: str, path: Path) -> list[str]:
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        return []
    lines = [ln.strip() for ln in (done.stdout + "\n" + done.stderr).splitlines()]
    problems = [ln for ln in lines if ln and not ln.startswith(("Checking ", "FAILED", "SUCCESS"))]
    return [p if p.startswith(str(path)) else f"{path}: {p}" for p in problems] or [
        f"{path}: promtool check rules failed with exit code {done.returncode}"]


def _promtool_version(promtool: str) -> str:
    try:
        out = subprocess.run([promtool, "--version"], capture_output=True, text=True, timeout=10)
    except OSError:
        return "version unknown"
    match = re.search(r"version (\S+)", out.stdout + out.stderr)
    return match.group(1) if match else "version unknown"


def _package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def _parser_problems(rule_file: RuleFile) -> list[str]:
    """What promtool would reject, checked without it: structure, names, durations, PromQL."""
    problems = []
    raw = yaml.safe_load(rule_file.path.read_text(encoding="utf-8")) or {}
    for group in raw.get("groups") or []:
        if not isinstance(group, dict) or not group.get("name"):
            problems.append(f"{rule_file.path}: a group has no name")
    for rule in rule_file.rules:
        where = f"{rule.where}: {rule.kind} {rule.name!r}"
        if bool(rule.alert) == bool(rule.record):
            problems.append(f"{rule.where}: a rule needs exactly one of 'alert' or 'record'")
        if not rule.expr:
            problems.append(f"{where}: field 'expr' must be set")
        elif rule.parse_error:
            problems.append(f"{where}: could not parse expression: {rule.parse_error}")
        if rule.record and not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", rule.record):
            problems.append(f"{where}: invalid recording rule name")
        if rule.for_ is not None and not _DURATION.match(rule.for_):
            problems.append(f"{where}: 'for' is not a duration: {rule.for_!r}")
        if rule.record and rule.for_ is not None:
            problems.append(f"{where}: a recording rule has no 'for'")
    return problems


def duration_s(text: str | None) -> float:
    """A Prometheus duration ('5m', '1h30m') in seconds; 0 for none."""
    if not text:
        return 0.0
    try:
        return promql_parser.parse_duration(text).total_seconds()
    except (ValueError, AttributeError):
        return 0.0
