"""The soak journal as a source for `triton-ready report PATH`, and as a Run (`journal_to_run`).

The report command asks each registered ReportSource whether it recognises a file; this one
recognises a journal by its header line and turns it into a readiness document through
`journal_to_run` and the report's own `build_document`, so a journal renders exactly like a run.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from ..run import Run
from ..settings import Settings
from ..soak.journal import KIND, read_journal
from ..soak.record import result_from_journal


class RecordedSettings(Settings):
    """The settings a journaled run used, as its header recorded them (secrets already redacted)."""

    def __init__(self, recorded: dict[str, Any]) -> None:
        super().__init__()
        self._recorded = dict(recorded)

    def redacted(self) -> dict[str, Any]:
        return dict(self._recorded)


def journal_to_run(path: str | Path) -> Run:
    """A Run (settings, one PERF-3 Result, context) from a soak journal, for the report writers.

    `write_reports(journal_to_run(path), directory)` renders a partial report (verdict INCOMPLETE,
    every window kept) from the journal of a runner that died. Raises JournalError when `path` is
    not a soak journal.
    """
    journal = read_journal(Path(path))
    header = journal.header
    result = result_from_journal(journal)
    finished = (journal.end or {}).get("finished_at")
    if finished is None and journal.windows:
        finished = dt.datetime.fromtimestamp(journal.windows[-1].wall_time, dt.timezone.utc).isoformat(timespec="seconds")
    context = dict(header.get("context") or {})
    context.setdefault("runner", {"pytest_triton_ready": "not recorded in the soak journal",
                                  "python": "not recorded in the soak journal"})
    context.setdefault("gpus", {"source": None, "gpus": [],
                                "unavailable_reason": "the soak journal did not record the GPU inventory"})
    context["soak_journal"] = {"path": str(journal.path), "windows": len(journal.windows),
                               "closed": journal.finished, "end": (journal.end or {}).get("reason")}
    run = Run(RecordedSettings(header.get("settings") or {}), [result], context=context,
              started_at=header.get("started_at") or "", finished_at=finished)
    return run


def accepts(peek: Any) -> bool:
    """A Peek (report.sources) of a journal: JSON lines, or one JSON line, whose first record is our header."""
    first = getattr(peek, "first", None)
    return isinstance(first, dict) and first.get("kind") == KIND


def journal_document(path: Path) -> dict[str, Any]:
    """The readiness document of a journal: PERF-3 INCOMPLETE unless the soak completed, every window kept."""
    from .document import build_document

    return build_document(journal_to_run(path))


def register() -> None:
    """Teach `triton-ready report` to read soak journals."""
    from .sources import ReportSource, register_source

    register_source(ReportSource("soak journal", "a PERF-3 soak journal, JSON lines, one window per line",
                                 accepts, journal_document))
