"""Grafana dashboard JSON: every panel's Prometheus queries, parsed as PromQL.

Accepts a dashboard as exported (`{"panels": [...]}`) or as the HTTP API returns it
(`{"dashboard": {...}}`); panels nested in rows (new `panels` and old `rows` layouts) are included.
Targets of non-Prometheus data sources (Loki, Tempo, ...) are left out: they are not PromQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TritonReadyError
from .promql import PromQLError, from_grafana, referenced_metrics

NON_PROMQL_SOURCES = {"loki", "tempo", "elasticsearch", "influxdb", "graphite", "mysql", "postgres",
                      "cloudwatch", "jaeger", "zipkin", "testdata"}


class DashboardError(TritonReadyError, ValueError):
    """A dashboard file that cannot be read or is not a Grafana dashboard."""


@dataclass
class PanelQuery:
    panel: str
    ref_id: str
    expr: str
    metrics: list[str] = field(default_factory=list)
    parse_error: str | None = None

    @property
    def where(self) -> str:
        return f"panel {self.panel!r} query {self.ref_id}"


@dataclass
class Dashboard:
    path: Path
    title: str
    panels: int
    queries: list[PanelQuery]
    skipped: list[str] = field(default_factory=list)  # panels whose queries are not PromQL


def load_dashboard(path: Path) -> Dashboard:
    """Read the dashboard and parse each panel query; DashboardError if the file is unusable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise DashboardError(f"{path}: cannot read the dashboard: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise DashboardError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    if isinstance(data, dict) and isinstance(data.get("dashboard"), dict):
        data = data["dashboard"]
    if not isinstance(data, dict) or not ("panels" in data or "rows" in data):
        raise DashboardError(f"{path}: not a Grafana dashboard (no 'panels' or 'rows')")
    panels = list(_panels(data))
    dashboard = Dashboard(Path(path), str(data.get("title", "")), len(panels), [])
    for panel in panels:
        title = str(panel.get("title") or f"id {panel.get('id', '?')}")
        for target in panel.get("targets") or []:
            expr = target.get("expr")
            if not isinstance(expr, str) or not expr.strip() or target.get("hide"):
                continue
            if _source_type(target.get("datasource") or panel.get("datasource")) in NON_PROMQL_SOURCES:
                dashboard.skipped.append(title)
                continue
            query = PanelQuery(title, str(target.get("refId", "?")), expr)
            try:
                query.metrics = referenced_metrics(from_grafana(expr))
            except PromQLError as exc:
                query.parse_error = str(exc)
            dashboard.queries.append(query)
    return dashboard


def _panels(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in node.get("panels") or []:
        if isinstance(panel, dict):
            if panel.get("type") != "row":
                yield panel
            yield from _panels(panel)
    for row in node.get("rows") or []:
        if isinstance(row, dict):
            yield from _panels(row)


def _source_type(source: Any) -> str:
    if isinstance(source, dict):
        return str(source.get("type", "")).lower()
    return str(source or "").lower()
