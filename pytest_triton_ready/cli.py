"""`triton-ready`: the packaged checklist, run by pytest, from anywhere the wheel is installed.

    triton-ready --triton-url=http://HOST:8000 [pytest options]
    triton-ready --triton-launch=embedded
    triton-ready report PATH          render Markdown and HTML again from a readiness.json,
                                      or a partial report from a soak journal
    triton-ready history DIR          an index with trends over a directory of run reports
"""

from __future__ import annotations

import sys
from pathlib import Path


def checklist_dir() -> Path:
    """Where the checklist's test files are installed."""
    from . import checks

    return Path(checks.__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["report"]:
        from .report.cli import main as report_main
        from .report.soak_journal import register as read_soak_journals

        read_soak_journals()
        return report_main(args[1:])
    if args[:1] == ["history"]:
        from .report.history import main as history_main

        return history_main(args[1:])
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        print("\nEvery option of the checklist (group 'triton-ready') and of pytest follows.\n")
    import pytest

    checklist = str(checklist_dir())
    rootdir = [] if any(a.startswith("--rootdir") for a in args) else [f"--rootdir={checklist}"]
    return int(pytest.main([checklist, "-p", "no:cacheprovider", *rootdir, *args]))


if __name__ == "__main__":
    sys.exit(main())
