"""What `triton-ready report PATH` can render: each ReportSource recognises a kind of file by its
content and turns it into a readiness document, which the Markdown and HTML renderers draw.

readiness.json is built in. Another kind of file (a soak journal: JSON lines, one window per
line) plugs in with `register_source(ReportSource(...))`: `accepts` looks at a Peek of the file
(its format and first record) and `load` returns a document that matches readiness.schema.json,
typically one Result per window or per rule with its measurements and a timeline Chart.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TritonReadyError
from ..record.model import SCHEMA_VERSION
from .document import DOCUMENT_KIND
from .schema import ReportInvalid, validate


class SourceError(TritonReadyError, ValueError):
    """A file that cannot be rendered; the message names the file and the cause in one line."""


@dataclass(frozen=True)
class Peek:
    """A first look at a file: `format` is json (one document), jsonl (one JSON object per line)
    or unknown; `first` is the document or the first record; `records` counts JSON-lines records."""

    path: Path
    format: str
    first: Any = None
    records: int = 0
    problem: str | None = None


@dataclass(frozen=True)
class ReportSource:
    name: str
    description: str
    accepts: Callable[[Peek], bool]
    load: Callable[[Path], dict[str, Any]]


def peek(path: Path) -> Peek:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return Peek(path, "unknown", problem="not UTF-8 text")
    except OSError as exc:
        raise SourceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return Peek(path, "json", json.loads(text))
    except json.JSONDecodeError as whole_error:
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            first = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            first = None
        if isinstance(first, dict):
            return Peek(path, "jsonl", first, len(lines))
        return Peek(path, "unknown", problem=f"not JSON ({whole_error.msg} at line {whole_error.lineno}) "
                                             "and not JSON lines")


def _is_readiness(peek: Peek) -> bool:
    return peek.format == "json" and isinstance(peek.first, dict) and peek.first.get("kind") == DOCUMENT_KIND


def load_readiness_json(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text(encoding="utf-8"))
    version = str(document.get("schema_version", ""))
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise SourceError(f"{path}: report schema {version or '(none)'}; this version of pytest-triton-ready "
                          f"reads {SCHEMA_VERSION.split('.')[0]}.x")
    return document


READINESS_JSON = ReportSource("readiness.json", "a run's readiness report", _is_readiness, load_readiness_json)

SOURCES: list[ReportSource] = [READINESS_JSON]


def register_source(source: ReportSource) -> None:
    """Make `triton-ready report` understand another kind of file; later registrations win."""
    SOURCES[:] = [s for s in SOURCES if s.name != source.name]
    SOURCES.insert(0, source)


def report_file(path: Path) -> Path:
    """A file as given, or the readiness.json inside a report directory."""
    if path.is_dir():
        inside = path / "readiness.json"
        if not inside.is_file():
            raise SourceError(f"{path}: a directory without readiness.json")
        return inside
    if not path.exists():
        raise SourceError(f"{path}: no such file")
    return path


def load_document(path: Path) -> tuple[ReportSource, dict[str, Any]]:
    """The readiness document the file at `path` holds (validated), and the source that read it."""
    path = report_file(Path(path))
    look = peek(path)
    source = next((s for s in SOURCES if s.accepts(look)), None)
    if source is None:
        raise SourceError(_unrecognised(look))
    try:
        document = source.load(path)
        validate(document, origin=f"{path} (read as {source.name})")
    except ReportInvalid as exc:
        raise SourceError(str(exc)) from None
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, SourceError):
            raise
        raise SourceError(f"{path}: {source.name} could not be read: {type(exc).__name__}: {exc}") from None
    return source, document


def _unrecognised(look: Peek) -> str:
    known = ", ".join(f"{s.name} ({s.description})" for s in SOURCES)
    if look.format == "jsonl":
        keys = ", ".join(sorted(look.first)[:8])
        return (f"{look.path}: JSON lines ({look.records} records; first record's keys: {keys}) that no "
                f"installed reader recognises; readers: {known}")
    if look.format == "json":
        kind = look.first.get("kind") if isinstance(look.first, dict) else type(look.first).__name__
        return f"{look.path}: JSON, but not a report any reader recognises (kind: {kind!r}); readers: {known}"
    return f"{look.path}: {look.problem}; readers: {known}"
