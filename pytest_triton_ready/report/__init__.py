"""The readiness report: built from the recorded Results alone."""

from __future__ import annotations

import json
from pathlib import Path

from .model import SCHEMA_VERSION, Result, Verdict


def overall_verdict(results: list[Result]) -> str:
    """READY, NOT READY (a check failed or broke) or INCOMPLETE (a blocking check could not run)."""
    if any(r.verdict in (Verdict.FAIL, Verdict.ERROR) for r in results):
        return "NOT READY"
    if any(r.blocking and r.verdict == Verdict.INCOMPLETE for r in results):
        return "INCOMPLETE"
    return "READY"


def write_reports(run, directory: Path) -> dict[str, Path]:
    """Write readiness.json into `directory`; returns the paths written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    document = {
        "schema_version": SCHEMA_VERSION,
        "verdict": overall_verdict(run.results),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "context": run.context or run.collect_context(),
        "settings": run.settings.redacted(),
        "results": [r.to_dict() for r in run.results],
    }
    path = directory / "readiness.json"
    path.write_text(json.dumps(document, indent=2, default=str))
    return {"json": path}
