"""Side-by-side tables for the benchmarks: medians of alternated rounds (the perf_analyzer ones),
before/after per check and 3 vs 12 models (checklist_time.py)."""

from __future__ import annotations

import statistics
import sys

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
