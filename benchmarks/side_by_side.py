"""The summary both perf_analyzer benchmarks print: medians of alternated rounds, side by side."""

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


def print_table(med: dict[str, dict[str, float]], labels: dict[str, str], digits: int = 3) -> None:
    """One Markdown row per key: perf_analyzer, engine, and engine / perf_analyzer."""
    print(f"| {'median of rounds':<20} | {'perf_analyzer':>14} | {'engine':>14} | {'engine / pa':>11} |")
    print(f"| {'-' * 20} | {'-' * 14} | {'-' * 14} | {'-' * 11} |")
    for key, label in labels.items():
        pa, en = med["perf_analyzer"][key], med["engine"][key]
        print(f"| {label:<20} | {pa:>14.{digits}f} | {en:>14.{digits}f} | {en / pa if pa else float('nan'):>11.3f} |")
