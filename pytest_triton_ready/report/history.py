"""`triton-ready history DIR`: an index over a directory of run reports, with trends.

Every readiness.json in DIR (or below, e.g. one report directory per night) is one run, ordered by
its start time. The index lists each run's verdict and its key numbers per model (capacity, p99 at
the target load, soak drift, memory slope, worst recovery time, error rate), and draws each key
number's trend per model as a chart (matplotlib, inline SVG). Written as history.html (one
self-contained page, the report's CSP) and history.md, into DIR unless --out says otherwise.
Exit status: 0 written; 2 DIR holds no readable report, or the files could not be written.
"""

from __future__ import annotations

import argparse
import os
import sys
from html import escape
from pathlib import Path
from typing import Any

from ..baseline import find_runs
from ..baseline.keynumbers import METRICS, key_numbers, model_label, ordered_models
from ..record.model import Chart, Series
from .charts import render_chart
from .summary import _value

TREND_METRICS = ("capacity", "p99", "soak_drift", "leak_slope", "recovery", "error_rate", "tokens_capacity",
                 "ttft_p99")


def collect(directory: Path) -> list[dict[str, Any]]:
    """One entry per run: where it is, its verdict, when it started, its key numbers."""
    runs = []
    for path, document in find_runs(directory):
        runs.append({"path": path, "verdict": document.get("verdict"), "started_at": document.get("started_at") or "",
                     "server": ((document.get("context") or {}).get("server") or {}).get("version"),
                     "numbers": document.get("key_numbers") or key_numbers(document)})
    return runs


def _label(run: dict[str, Any]) -> str:
    return str(run["started_at"]).replace("T", " ")[:16] or run["path"].parent.name


def trend_charts(runs: list[dict[str, Any]]) -> list[Chart]:
    """One chart per key number that some run has: a line per model over the runs (in order)."""
    charts = []
    models = ordered_models({m: 1 for run in runs for m in run["numbers"]})
    for metric in METRICS:
        if metric.key not in TREND_METRICS:
            continue
        series = []
        for model in models:
            points = [(_label(run), (run["numbers"].get(model) or {}).get(metric.key)) for run in runs]
            if any(v is not None for _, v in points):
                series.append(Series(model_label(model), points))
        if series:
            unit = "" if metric.unit == "ratio" else f" ({metric.unit})"
            charts.append(Chart(f"{metric.label} per run", "run (start time, UTC)", f"{metric.label}{unit}", series))
    return charts


def _table_rows(runs: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    models = ordered_models({m: 1 for run in runs for m in run["numbers"]})
    columns = [(model, metric) for model in models for metric in METRICS if metric.key in TREND_METRICS
               and any(metric.key in (run["numbers"].get(model) or {}) for run in runs)]
    headings = ["run", "verdict", "server"] + [f"{model_label(m)}: {metric.label}" for m, metric in columns]
    rows = []
    for run in reversed(runs):  # newest first
        cells = [_label(run), str(run["verdict"]), str(run["server"] or "—")]
        for model, metric in columns:
            value = (run["numbers"].get(model) or {}).get(metric.key)
            unit_text = "" if metric.unit == "ratio" else f" {metric.unit}"
            cells.append("—" if value is None else _value(value, metric.unit, metric.share) + unit_text)
        rows.append(cells)
    return headings, rows


def render_history_markdown(runs: list[dict[str, Any]], directory: Path) -> str:
    headings, rows = _table_rows(runs)
    verdicts = " · ".join(f"{_label(r)} {r['verdict']}" for r in runs[-10:])
    lines = [f"# Triton readiness history: {len(runs)} runs", "", f"Runs under `{directory}`, newest first. "
             f"Latest: **{runs[-1]['verdict']}**.", "", f"Last verdicts: {verdicts}", "",
             "| " + " | ".join(headings) + " |", "|" + "---|" * len(headings)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    lines += ["", "Trends are drawn in history.html.", ""]
    return "\n".join(lines)


def render_history_html(runs: list[dict[str, Any]], directory: Path, out: Path) -> str:
    from importlib.resources import files

    css = files("pytest_triton_ready.report").joinpath("templates/readiness.css").read_text(encoding="utf-8")
    headings, rows = _table_rows(runs)
    latest = runs[-1]["verdict"] or "?"
    verdict_class = str(latest).lower().replace(" ", "-")
    links = []
    for run in reversed(runs):
        html_path = run["path"].with_name("readiness.html")
        target = os.path.relpath(html_path, out) if html_path.exists() else None
        links.append(target)
    body_rows = []
    for row, link, run in zip(rows, links, reversed(runs), strict=False):
        first = f'<a href="{escape(link)}">{escape(row[0])}</a>' if link else escape(row[0])
        cells = [first] + [escape(c) for c in row[1:]]
        body_rows.append(f'<tr class="run" data-verdict="{escape(str(run["verdict"]))}">'
                         + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    charts = "\n".join(f'<figure class="chart">{render_chart(chart)}</figure>' for chart in trend_charts(runs))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<link rel="icon" href="data:,">
<title>Triton readiness history: {len(runs)} runs</title>
<style>
{css}
</style>
</head>
<body>
<header id="verdict" class="verdict-banner v-{escape(verdict_class)}">
  <h1>Triton readiness history</h1>
  <p class="verdict-word" data-verdict="{escape(str(latest))}">{escape(str(latest))}</p>
  <p>latest of {len(runs)} runs under <code>{escape(str(directory))}</code></p>
</header>
<section id="runs">
<h2>Runs, newest first</h2>
<div class="wide"><table id="history-table">
<thead><tr>{''.join(f'<th>{escape(h)}</th>' for h in headings)}</tr></thead>
<tbody>
{chr(10).join(body_rows)}
</tbody>
</table></div>
</section>
<section id="trends">
<h2>Trends</h2>
{charts or '<p class="muted">No key number was measured in any run.</p>'}
</section>
<footer>pytest-triton-ready history · one self-contained file: no scripts, no network.</footer>
</body>
</html>
"""


def write_history(directory: Path, out: Path | None = None) -> dict[str, Path]:
    runs = collect(directory)
    if not runs:
        raise FileNotFoundError(f"{directory}: no readiness.json in this directory or below")
    out = Path(out or directory)
    out.mkdir(parents=True, exist_ok=True)
    html = out / "history.html"
    html.write_text(render_history_html(runs, Path(directory), out), encoding="utf-8")
    md = out / "history.md"
    md.write_text(render_history_markdown(runs, Path(directory)), encoding="utf-8")
    return {"html": html, "md": md}


def main(argv: list[str] | None = None) -> int:
    parse = argparse.ArgumentParser(prog="triton-ready history",
                                    description="An index with trends over a directory of run reports.")
    parse.add_argument("directory", type=Path, metavar="DIR", help="directory holding readiness.json files (any depth)")
    parse.add_argument("--out", type=Path, metavar="DIR", help="where to write history.html and history.md (default: DIR)")
    try:
        args = parse.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        written = write_history(args.directory, args.out)
    except FileNotFoundError as exc:
        print(f"triton-ready history: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"triton-ready history: cannot write: {exc}", file=sys.stderr)
        return 2
    for path in written.values():
        print(f"wrote {path}")
    return 0
