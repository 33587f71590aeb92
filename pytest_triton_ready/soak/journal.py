"""The soak journal: JSON lines, one per window, each flushed and fsynced as it is written.

A runner killed in hour 20 leaves every finished window on disk. The first line is a header (the
plan, the context, the settings with secrets redacted); then one line per window; a clean end
(completed, interrupted, or broken by an error) adds a last `end` line. A journal without that line
is the trace of a runner that died, and renders as an INCOMPLETE report.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TritonReadyError
from .windows import SoakWindow

KIND = "triton-ready-soak-journal"
SCHEMA_VERSION = 1


class JournalError(TritonReadyError, ValueError):
    """A file that is not a soak journal, or one whose header cannot be read."""


class JournalWriter:
    """Appends durable lines to a new journal file."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "w", encoding="utf-8")
        except OSError as exc:
            parent = next((p for p in self.path.parents if p.exists()), None)
            why = f"{parent} is not a directory" if parent is not None and not parent.is_dir() else exc.strerror or exc
            raise JournalError(f"cannot write the soak journal {self.path}: {why}") from None
        _fsync_directory(self.path.parent)
        self._write({"kind": KIND, "schema_version": SCHEMA_VERSION, **header})

    def window(self, window: SoakWindow) -> None:
        self._write({"kind": "window", **window.to_dict()})

    def end(self, reason: str, finished_at: str, **extra: Any) -> None:
        """The closing line: `completed`, `interrupted` or `error`; then the file is closed."""
        self._write({"kind": "end", "reason": reason, "finished_at": finished_at, **extra})
        self.close()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def _write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, default=str, separators=(",", ":")) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())


@dataclass
class Journal:
    """A journal as read back: header, every intact window, the end line if the run got there."""

    path: Path
    header: dict[str, Any]
    windows: list[SoakWindow] = field(default_factory=list)
    end: dict[str, Any] | None = None
    damaged_lines: list[int] = field(default_factory=list)  # 1-based numbers of lines that did not parse

    @property
    def finished(self) -> bool:
        return self.end is not None


def is_journal(path: Path) -> bool:
    """Whether `path` starts with a soak journal header (how `triton-ready report` tells it apart)."""
    try:
        with open(path, encoding="utf-8") as handle:
            first = json.loads(handle.readline())
    except (OSError, ValueError):
        return False
    return isinstance(first, dict) and first.get("kind") == KIND


def read_journal(path: Path) -> Journal:
    """Read a journal, keeping every intact window; a torn last line (a killed runner) is skipped."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise JournalError(f"{path}: cannot read the soak journal: {exc.strerror}") from None
    if not lines:
        raise JournalError(f"{path}: empty file, not a soak journal")
    try:
        header = json.loads(lines[0])
    except ValueError:
        raise JournalError(f"{path}:1: not a soak journal (the first line is not JSON)") from None
    if not isinstance(header, dict) or header.get("kind") != KIND:
        raise JournalError(f"{path}:1: not a soak journal (no '{KIND}' header)")
    if header.get("schema_version", 0) > SCHEMA_VERSION:
        raise JournalError(f"{path}:1: journal schema {header['schema_version']} is newer than this "
                           f"version of pytest-triton-ready reads ({SCHEMA_VERSION})")
    journal = Journal(path, header)
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            kind = record.get("kind")
            if kind == "window":
                journal.windows.append(SoakWindow.from_dict(record))
            elif kind == "end":
                journal.end = record
        except (ValueError, TypeError, AttributeError):
            journal.damaged_lines.append(number)
    return journal


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
