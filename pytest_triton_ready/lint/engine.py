"""The lint engine: a registry of small rules, the context they read, and the findings they give.

A rule is one function `(source, context) -> iterable of Violation`, registered with its id,
default severity and a one-line summary (docs/config-rules.md lists them). The engine adds the
model, the origin and the rule id, and leaves out rules a team disabled by id in YAML
(`lint: {disable: [...]}`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import TritonReadyError
from .modelconfig import ModelSource

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Violation:
    """What a rule returns: the offending value and the reason in one sentence."""

    value: Any
    reason: str
    severity: str | None = None  # None: the rule's default; "info" for a rule that could not look


@dataclass(frozen=True)
class LintFinding:
    rule: str
    severity: str
    model: str
    value: Any
    reason: str
    origin: str

    @property
    def message(self) -> str:
        return f"{self.model}: {self.reason} [{self.rule}; value {self.value}; {self.origin}]"


@dataclass
class LintContext:
    """What rules know beyond the config itself: SLOs and declarations from the YAML, the GPUs
    and, where measured, each model's GPU memory."""

    slo_p99_ms: dict[str, float] = field(default_factory=dict)
    min_throughput: dict[str, float] = field(default_factory=dict)
    nondeterministic_models: set[str] = field(default_factory=set)
    stateful_models: set[str] = field(default_factory=set)
    preferred_batch_size_models: set[str] = field(default_factory=set)
    rollouts: dict[str, str] = field(default_factory=dict)
    queue_delay_budget_fraction: float = 0.8
    gpus: list | None = None  # [GpuReading]; None when the GPUs could not be read
    gpus_unknown_reason: str = "the GPUs were not read"
    model_memory_bytes: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> gpu uuid -> bytes
    model_memory_unmeasured: dict[str, str] = field(default_factory=dict)  # model -> why not
    # every model of the repository by name (ensemble steps are looked up here): its source, or None
    # where it exists but its config could not be read; None when the repository is unknown
    repository: dict[str, ModelSource | None] | None = None
    repository_where: str = "the repository"


@dataclass(frozen=True)
class LintRule:
    id: str
    severity: str
    summary: str
    check: Callable[[ModelSource, LintContext], Iterable[Violation]]


RULES: dict[str, LintRule] = {}


def rule(rule_id: str, severity: str, summary: str):
    """Register a rule function under its id."""
    if severity not in SEVERITIES:
        raise ValueError(f"rule {rule_id}: unknown severity {severity!r}")

    def register(function: Callable[[ModelSource, LintContext], Iterable[Violation]]):
        if rule_id in RULES:
            raise ValueError(f"rule id {rule_id} registered twice")
        RULES[rule_id] = LintRule(rule_id, severity, summary, function)
        return function

    return register


class UnknownRule(TritonReadyError, ValueError):
    """A disabled rule id that no rule has."""


def lint(sources: Iterable[ModelSource], context: LintContext, disabled: Iterable[str] = ()) -> list[LintFinding]:
    """Every finding of every enabled rule on every model, in model then rule order."""
    disabled = set(disabled)
    unknown = sorted(disabled - set(RULES))
    if unknown:
        raise UnknownRule(f"lint.disable names unknown rule(s) {', '.join(unknown)} (known: {', '.join(sorted(RULES))})")
    return [finding for source in sources for finding in _lint_one(source, context, disabled)]


def _lint_one(source: ModelSource, context: LintContext, disabled: set[str]) -> Iterator[LintFinding]:
    for rule_ in RULES.values():
        if rule_.id in disabled:
            continue
        for violation in rule_.check(source, context):
            yield LintFinding(rule_.id, violation.severity or rule_.severity, source.name, violation.value,
                              violation.reason, source.origin)
