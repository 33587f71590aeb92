"""CSV exports written next to readiness.json, for spreadsheets and plotting scripts.

- `measurements.csv`: every measurement of every check, one row each (check, model, name, value,
  unit, threshold, whether it was met, where the threshold came from).
- `curves.csv`: PERF-2's throughput-latency curves in perf_analyzer-like columns (one row per model
  and concurrency; latencies in microseconds, as perf_analyzer's `-f` file writes them).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

MEASUREMENT_COLUMNS = ("check_id", "phase", "check_verdict", "model", "name", "value", "unit", "threshold",
                       "comparison", "passed", "threshold_source")
CURVE_COLUMNS = ("Model", "Concurrency", "Inferences/Second", "p50 latency", "p99 latency")

_AT_CONCURRENCY = re.compile(r"^(throughput|p99) at concurrency (\d+)$")


def measurement_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for result in document.get("results", []):
        for m in result.get("measurements", []):
            rows.append({
                "check_id": result["check_id"], "phase": result["phase"], "check_verdict": result["verdict"],
                "model": m.get("model") or "", "name": m.get("name"), "value": _cell(m.get("value")),
                "unit": m.get("unit") or "", "threshold": _cell(m.get("threshold")),
                "comparison": m.get("comparison") or "",
                "passed": "" if m.get("passed") is None else ("yes" if m["passed"] else "no"),
                "threshold_source": m.get("threshold_source") or "",
            })
    return rows


def curve_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """PERF-2's points: throughput and p99 from its measurements, p50 from its concurrency chart."""
    points: dict[tuple[str, int], dict[str, Any]] = {}
    for result in document.get("results", []):
        if result.get("check_id") != "PERF-2":
            continue
        for m in result.get("measurements", []):
            match = _AT_CONCURRENCY.match(str(m.get("name", "")))
            if not match or not m.get("model"):
                continue
            point = points.setdefault((m["model"], int(match.group(2))), {})
            point[match.group(1)] = m.get("value")
        for chart in result.get("charts", []):
            model = str(chart.get("title", "")).split(":", 1)[0]
            if "concurrency" not in str(chart.get("x_label", "")):
                continue
            for series in chart.get("series", []):
                if series.get("name") == "p50":
                    for x, y in series.get("points", []):
                        if (model, int(x)) in points:
                            points[(model, int(x))]["p50"] = y
    rows = []
    for (model, concurrency), point in sorted(points.items()):
        rows.append({"Model": model, "Concurrency": concurrency,
                     "Inferences/Second": _cell(point.get("throughput")),
                     "p50 latency": _usec(point.get("p50")), "p99 latency": _usec(point.get("p99"))})
    return rows


def _usec(ms: Any) -> str:
    return "" if not isinstance(ms, (int, float)) or isinstance(ms, bool) else str(round(ms * 1000))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def to_csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def write_csv(document: dict[str, Any], directory: Path) -> dict[str, Path]:
    """Write measurements.csv and curves.csv (only when the run measured a curve) into `directory`."""
    directory = Path(directory)
    written = {}
    path = directory / "measurements.csv"
    path.write_text(to_csv(measurement_rows(document), MEASUREMENT_COLUMNS), encoding="utf-8")
    written["csv"] = path
    curves = curve_rows(document)
    if curves:
        path = directory / "curves.csv"
        path.write_text(to_csv(curves, CURVE_COLUMNS), encoding="utf-8")
        written["curves_csv"] = path
    return written
