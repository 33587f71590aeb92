"""The readiness report, built from the recorded Results alone.

`write_reports(run, dir)` writes readiness.json (the document, validated against the shipped
schema), readiness.md (a CI job summary) and readiness.html (one self-contained page). The
Markdown and HTML are rendered from the document, so `triton-ready report readiness.json` gives
the same files again after the run is gone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..record.verdict import INCOMPLETE, NOT_READY, READY, overall_verdict, verdict_reason
from .document import build_document, dumps

__all__ = ["INCOMPLETE", "NOT_READY", "READY", "build_document", "overall_verdict", "render_files",
           "report_dir_problem", "verdict_reason", "write_reports"]


def report_dir_problem(directory: Path) -> str | None:
    """Why the report could not be written into `directory` (which need not exist yet), or None.
    Creates nothing: the nearest existing ancestor must be a writable directory."""
    import os

    directory = Path(directory).absolute()
    existing = next((p for p in (directory, *directory.parents) if p.exists()), None)
    if existing is None:
        return f"{directory}: no part of the path exists"
    if not existing.is_dir():
        return f"{directory}: {existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{directory}: {existing} is not writable"
    return None


def render_files(document: dict[str, Any], directory: Path, stem: str = "readiness",
                 formats: tuple[str, ...] = ("md", "html")) -> dict[str, Path]:
    """Write the Markdown and/or HTML of `document` as DIR/STEM.md and DIR/STEM.html."""
    from .html import render_html
    from .markdown import render_markdown

    renderers = {"md": render_markdown, "html": render_html}
    written = {}
    for kind in formats:
        path = Path(directory) / f"{stem}.{kind}"
        path.write_text(renderers[kind](document), encoding="utf-8")
        written[kind] = path
    return written


def write_reports(run, directory: Path) -> dict[str, Path]:
    """Write readiness.json, readiness.md, readiness.html and the CSV files (measurements.csv, and
    curves.csv when PERF-2 measured a curve) into `directory`; returns their paths.
    The JSON is written first, so that a rendering problem never loses what was measured; a
    document that does not match the schema is written, then reported (ReportInvalid)."""
    from .schema import validate

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    document = build_document(run)
    path = directory / "readiness.json"
    path.write_text(dumps(document), encoding="utf-8")
    written = {"json": path, **render_files(document, directory)}
    from .csvfiles import write_csv

    written.update(write_csv(document, directory))
    validate(document, origin=str(path))  # after writing: a schema problem must not lose the report
    return written
