"""Side-by-side tables for the benchmarks: medians of alternated rounds (the perf_analyzer ones),
before/after per check and 3 vs 12 models (checklist_time.py), and the section of
docs/benchmarks.md a benchmark writes its latest table into."""

from __future__ import annotations

import platform
import statistics
import sys
from pathlib import Path

TOOLS = ("perf_analyzer", "engine")


def medians(rows: list[dict], keys: tuple[str, ...]) -> dict[str, dict[str, float]] | None:
    """{tool: {key: median over its rounds}}, or None (said on stderr) when a tool has no result."""
    ok = {tool: [r for r in rows if r["tool"] == tool and "error" not in r] for tool in TOOLS}
    if not all(ok.values()):
        print("no comparison: a tool produced no result", file=sys.stderr)
        return None
    return {tool: {k: statistics.median(r[k] for r in ok[tool]) for k in keys} for tool in TOOLS}


def print_table(med: dict[str, dict[str, float]], labels: dict[str, str], digits: int = 3,
                columns: tuple[str, str] = TOOLS, first: str = "median of rounds", ratio: str = "engine / pa") -> None:
    """One Markdown row per key: the two columns' values, then the second / the first."""
    a, b = columns
    print(f"| {first:<20} | {a:>14} | {b:>14} | {ratio:>11} |")
    print(f"| {'-' * 20} | {'-' * 14} | {'-' * 14} | {'-' * 11} |")
    for key, label in labels.items():
        x, y = med[a].get(key, float("nan")), med[b].get(key, float("nan"))
        print(f"| {label:<20} | {x:>14.{digits}f} | {y:>14.{digits}f} | {y / x if x else float('nan'):>11.3f} |")


def machine_line() -> str:
    """The client host in one line: processor model, cores this process may use, Python."""
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                      if line.startswith("model name")), "")
    from pytest_triton_ready.load.workers import usable_cores

    return f"{model or platform.machine()}, {usable_cores()} cores usable, Python {platform.python_version()}"


def write_section(path: Path, name: str, text: str) -> None:
    """Put `text` between the markers `<!-- NAME: begin -->` and `<!-- NAME: end -->` of the
    Markdown file `path`, replacing what was there; without markers, the section goes before the
    first `## Measured` heading (else at the end)."""
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    doc = path.read_text() if path.exists() else ""
    if begin in doc and end in doc:
        head, rest = doc.split(begin, 1)
        doc = head + block + rest.split(end, 1)[1].lstrip("\n")
    elif "\n## Measured" in doc:
        head, rest = doc.split("\n## Measured", 1)
        doc = f"{head}\n{block}\n## Measured{rest}"
    else:
        doc = f"{doc.rstrip()}\n\n{block}" if doc else block
    path.write_text(doc)
