"""The soak journal as a source for `triton-ready report PATH`.

The report command asks each registered ReportSource whether it recognises a file; this one
recognises a journal by its header line and turns it into a readiness document through
`journal_to_run` and the report's own `build_document`, so a journal renders exactly like a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .journal import KIND
from .record import journal_to_run


def accepts(peek: Any) -> bool:
    """A Peek (report.sources) of a journal: JSON lines, or one JSON line, whose first record is our header."""
    first = getattr(peek, "first", None)
    return isinstance(first, dict) and first.get("kind") == KIND


def journal_document(path: Path) -> dict[str, Any]:
    """The readiness document of a journal: PERF-3 INCOMPLETE unless the soak completed, every window kept."""
    from ..report.document import build_document

    return build_document(journal_to_run(path))


def register() -> None:
    """Teach `triton-ready report` to read soak journals."""
    from ..report.sources import ReportSource, register_source

    register_source(ReportSource("soak journal", "a PERF-3 soak journal, JSON lines, one window per line",
                                 accepts, journal_document))
