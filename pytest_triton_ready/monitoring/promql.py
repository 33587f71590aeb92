"""PromQL through the `promql-parser` package: parse an expression, list the metrics it reads,
and split an alert expression into the signals its threshold comparisons are applied to."""

from __future__ import annotations

import re

import promql_parser

from ..errors import TritonReadyError

COMPARISONS = {"==", "!=", ">", "<", ">=", "<="}
SET_OPERATORS = {"and", "or", "unless"}

# Grafana template variables: $__rate_interval and friends are durations, others are label values.
_GRAFANA_DURATION = re.compile(r"\$__(rate_interval|interval|range)(_ms|_s)?|\$\{__(rate_interval|interval|range)\}")
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]+\}|\[\[[^\]]+\]\]|\$[A-Za-z_][A-Za-z0-9_]*")


class PromQLError(TritonReadyError, ValueError):
    """An expression that does not parse; the message is the parser's."""


def parse(expr: str) -> promql_parser.Expr:
    """The expression's syntax tree, or PromQLError."""
    try:
        return promql_parser.parse(expr)
    except ValueError as exc:
        raise PromQLError(str(exc)) from None


def referenced_metrics(expr: str | promql_parser.Expr) -> list[str]:
    """Every metric name the expression selects, in order of first use (`{__name__="x"}` included)."""
    tree = parse(expr) if isinstance(expr, str) else expr
    names: list[str] = []

    def visit(node) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name or next(
                (m.value for m in node.matchers.matchers if m.name == "__name__" and m.op == promql_parser.MatchOp.Equal),
                None,
            )
            if name and name not in names:
                names.append(name)

    promql_parser.walk(tree, visit)
    return names


def signals(expr: str) -> list[str]:
    """The parts of an alert expression that must return series for the alert to ever fire.

    `x > 100` needs `x`; `a > 1 and b < 2` needs `a` and `b`; an expression with no threshold
    comparison is its own signal. A comparison with the `bool` modifier is a value, not a filter.
    """
    return [str(node) for node in _signal_nodes(parse(expr))]


def _signal_nodes(node) -> list:
    while isinstance(node, promql_parser.ParenExpr):
        node = node.expr
    if isinstance(node, promql_parser.BinaryExpr):
        op = str(node.op).strip()
        returns_bool = bool(node.modifier and node.modifier.return_bool)
        if op in SET_OPERATORS:
            return _signal_nodes(node.lhs) + _signal_nodes(node.rhs)
        if op in COMPARISONS and not returns_bool:
            sides = [side for side in (node.lhs, node.rhs) if not _is_scalar(side)]
            return [n for side in sides for n in _signal_nodes(side)] or [node]
    return [node]


def _is_scalar(node) -> bool:
    while isinstance(node, promql_parser.ParenExpr):
        node = node.expr
    return isinstance(node, (promql_parser.NumberLiteral, promql_parser.StringLiteral)) or (
        isinstance(node, promql_parser.UnaryExpr) and _is_scalar(node.expr)
    )


def from_grafana(expr: str) -> str:
    """A Grafana panel query with its template variables replaced, so it parses as PromQL."""
    expr = _GRAFANA_DURATION.sub("5m", expr)
    return _GRAFANA_VARIABLE.sub(".+", expr)
