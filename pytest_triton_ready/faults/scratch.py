"""A scratch copy of one model's repository directory, served by a second server of the same kind
as the run's: where a new version can be rolled out without touching the repository under test."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import TritonReadyError


class ScratchUnsupported(TritonReadyError, RuntimeError):
    """The run's launcher cannot start a second server on another repository."""


def numeric_versions(model_dir: Path) -> list[int]:
    return sorted(int(p.name) for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit())


def add_version(model_dir: Path, source: int, new: int) -> Path:
    """Version `new` as a copy of version `source` (a real new version directory on disk)."""
    target = model_dir / str(new)
    shutil.copytree(model_dir / str(source), target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@contextmanager
def scratch_server(launcher: Any, model: str) -> Iterator[tuple[Any, Path]]:
    """(a started launcher, the scratch model directory): a copy of `model` alone, served by a
    server like the run's one (`launcher.scratch`). Removed, and the server stopped, on exit."""
    if not launcher.capabilities.can_start_scratch:
        raise ScratchUnsupported(f"the {launcher.name} launcher cannot start a second server "
                                 "on a scratch copy of the repository")
    source = Path(launcher.model_repository) / model
    if not source.is_dir():
        raise ScratchUnsupported(f"{source} is not a model directory")
    root = Path(tempfile.mkdtemp(prefix="triton-ready-scratch-"))
    try:
        shutil.copytree(source, root / model, ignore=shutil.ignore_patterns("__pycache__"))
        server = launcher.scratch(root)
        try:
            server.start()
            yield server, root / model
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(root, ignore_errors=True)
