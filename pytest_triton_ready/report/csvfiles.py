"""CSV exports written next to readiness.json, for spreadsheets and plotting scripts.

- `measurements.csv`: every measurement of every check, one row each (check, model, name, value,
  unit, threshold, whether it was met, where the threshold came from).
- `curves.csv`: PERF-2's throughput-latency curves in perf_analyzer's columns (one row per model
  and concurrency; times in microseconds, as perf_analyzer's `-f` file writes them, the unit in
  each header). A column the run did not measure is empty, never 0: Client Send and Client Recv
  always (the load engine times a request whole), the server's stage times when its statistics
  could not be read. Network+Server Send/Recv is perf_analyzer's remainder, the mean latency less
  the server's queue and compute times (capped at 0); here it includes the client's own send and
  receive time.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

MEASUREMENT_COLUMNS = ("check_id", "phase", "check_verdict", "model", "name", "value", "unit", "threshold",
                       "comparison", "passed", "threshold_source")
CURVE_COLUMNS = ("Model", "Concurrency", "Inferences/Second", "Client Send (us)", "Network+Server Send/Recv (us)",
                 "Server Queue (us)", "Server Compute Input (us)", "Server Compute Infer (us)",
                 "Server Compute Output (us)", "Client Recv (us)", "p50 latency (us)", "p90 latency (us)",
                 "p95 latency (us)", "p99 latency (us)", "Avg latency (us)", "Success Rate (ratio)", "Stable and Valid",
                 "Inferences/Second Low", "Inferences/Second High", "p99 latency Low (us)", "p99 latency High (us)")
_SERVER_COLUMNS = {"Server Queue (us)": "server_queue_us", "Server Compute Input (us)": "server_compute_input_us",
                   "Server Compute Infer (us)": "server_compute_infer_us",
                   "Server Compute Output (us)": "server_compute_output_us"}
_LATENCY_COLUMNS = {"p50 latency (us)": "p50_ms", "p90 latency (us)": "p90_ms", "p95 latency (us)": "p95_ms",
                    "p99 latency (us)": "p99_ms", "Avg latency (us)": "mean_ms"}

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
    """PERF-2's points, one row per model and concurrency, from the points its checks kept
    (`load_points`); a report written before they were kept gives throughput, p50 and p99 from
    the measurements and the concurrency chart."""
    by_point = {}
    for result in document.get("results", []):
        if result.get("check_id") != "PERF-2":
            continue
        for point in result.get("load_points") or []:
            by_point[(point["model"], int(point["concurrency"]))] = load_point_row(point)
    if by_point:
        return [by_point[key] for key in sorted(by_point)]
    return _rows_from_measurements(document)


def load_point_row(point: dict[str, Any]) -> dict[str, Any]:
    """One curves.csv row from a LoadPoint (as in readiness.json); unmeasured cells empty."""
    row = {column: "" for column in CURVE_COLUMNS}
    row.update({"Model": point["model"], "Concurrency": point["concurrency"],
                "Inferences/Second": _cell(point.get("throughput_infer_s")),
                "Success Rate (ratio)": _cell(point.get("success_rate")),
                "Stable and Valid": _cell(point.get("trustworthy")),
                "Inferences/Second Low": _cell(point.get("throughput_low")),
                "Inferences/Second High": _cell(point.get("throughput_high")),
                "p99 latency Low (us)": _usec(point.get("p99_low_ms")),
                "p99 latency High (us)": _usec(point.get("p99_high_ms"))})
    for column, key in _LATENCY_COLUMNS.items():
        row[column] = _usec(point.get(key))
    server = {column: point.get(key) for column, key in _SERVER_COLUMNS.items()}
    for column, value in server.items():
        row[column] = _whole(value)
    mean = point.get("mean_ms")
    if _number(mean) and all(_number(v) for v in server.values()):
        row["Network+Server Send/Recv (us)"] = _whole(max(0.0, mean * 1000 - sum(server.values())))
    return row


def _rows_from_measurements(document: dict[str, Any]) -> list[dict[str, Any]]:
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
        row = {column: "" for column in CURVE_COLUMNS}
        row.update({"Model": model, "Concurrency": concurrency, "Inferences/Second": _cell(point.get("throughput")),
                    "p50 latency (us)": _usec(point.get("p50")), "p99 latency (us)": _usec(point.get("p99"))})
        rows.append(row)
    return rows


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _usec(ms: Any) -> str:
    """Milliseconds as whole microseconds; empty when not measured."""
    return str(round(ms * 1000)) if _number(ms) else ""


def _whole(us: Any) -> str:
    return str(round(us)) if _number(us) else ""


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
