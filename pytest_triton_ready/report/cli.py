"""`triton-ready report PATH`: render Markdown and HTML again from a saved report.

PATH is a readiness.json, a report directory holding one, or any file a registered ReportSource
recognises (see sources.py). The files are written next to PATH unless --out says otherwise.
Exit status: 0 rendered; 1 rendered but the verdict is not READY and --fail-unless-ready was
given; 2 the file could not be read (one line on stderr names the file and the cause).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import render_files
from .sources import SourceError, load_document


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="triton-ready report",
        description="Render readiness.md and readiness.html again from a readiness.json "
                    "(or another file a registered reader recognises).",
    )
    parse.add_argument("path", type=Path, metavar="PATH", help="readiness.json, or a report directory holding one")
    parse.add_argument("--out", type=Path, metavar="DIR", help="where to write the files (default: next to PATH)")
    parse.add_argument("--format", dest="formats", default="md,html", metavar="md,html",
                       help="which files to write (default: md,html)")
    parse.add_argument("--fail-unless-ready", action="store_true",
                       help="exit 1 when the report's verdict is not READY (a CI gate on an archived report)")
    return parse


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has already printed
        return int(exc.code or 0)
    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    unknown = [f for f in formats if f not in ("md", "html")]
    if unknown or not formats:
        print(f"triton-ready report: --format {args.formats!r}: choose from md, html", file=sys.stderr)
        return 2
    try:
        source, document = load_document(args.path)
    except SourceError as exc:
        print(f"triton-ready report: {exc}", file=sys.stderr)
        return 2
    origin = args.path / "readiness.json" if args.path.is_dir() else args.path
    out = args.out or origin.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = render_files(document, out, stem=origin.stem, formats=formats)
    except OSError as exc:
        print(f"triton-ready report: cannot write into {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for path in written.values():
        print(f"wrote {path}")
    print(f"verdict: {document['verdict']} ({document['verdict_reason']}), read as {source.name}")
    if args.fail_unless_ready and document["verdict"] != "READY":
        return 1
    return 0
