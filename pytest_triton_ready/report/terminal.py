"""The terminal summary: a compact checklist table, one row per check, and the verdict.

A passing check takes one line; a check that did not pass gets a second, indented line saying
why (its first finding, or the reason it could not run), since that is what a reader acts on.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Result, Verdict
from .text import detail, shorten
from .verdict import VERDICT_LABELS

VERDICT_MARKUP = {"pass": {"green": True}, "fail": {"red": True, "bold": True}, "error": {"red": True},
                  "incomplete": {"yellow": True}, "not_applicable": {}}
OVERALL_MARKUP = {"READY": {"green": True, "bold": True}, "NOT READY": {"red": True, "bold": True},
                  "INCOMPLETE": {"yellow": True, "bold": True}, "PARTIAL": {"yellow": True, "bold": True}}


@dataclass
class Row:
    head: str  # check id and title, padded
    verdict: str  # padded; an advisory check's verdict carries a `*`
    markup: dict
    tail: str  # what decided it, on the same line (passing checks)
    why: str  # what decided it, on its own line (every other verdict)


def checklist_rows(results: list[Result], width: int = 120) -> list[Row]:
    """The table's rows, cut to fit `width` columns."""
    id_width = max([len(r.check_id) for r in results] + [5])
    verdicts = [VERDICT_LABELS[r.verdict] + ("" if r.blocking else "*") for r in results]
    verdict_width = max(len(v) for v in verdicts) + 2 if verdicts else 8
    title_width = max(20, min(60, width - id_width - verdict_width - 30))
    indent = " " * (id_width + 2)
    titles = distinct_titles(results, title_width)
    rows = []
    for result, verdict, title in zip(results, verdicts, titles, strict=False):
        head = f"{result.check_id:<{id_width}}  {title:<{title_width}}  "
        text = detail(result)
        passed = result.verdict == Verdict.PASS
        tail = shorten(text, max(width - len(head) - verdict_width, 10)) if passed else ""
        why = "" if passed or not text else indent + shorten(text, max(width - len(indent), 20))
        rows.append(Row(head, f"{verdict:<{verdict_width}}", VERDICT_MARKUP.get(result.verdict.value, {}), tail, why))
    return rows


def _function_words(result: Result) -> str:
    """'gpu memory headroom' from a nodeid ending in ::test_gpu_memory_headroom[...]."""
    name = result.nodeid.split("::")[-1].split("[")[0]
    return name.removeprefix("test_").replace("_", " ")


def distinct_titles(results: list[Result], width: int) -> list[str]:
    """Each check's title cut to `width`; where two rows of the same check id would read the same,
    each reads as its test function's words instead (still cut to width), so no two rows collide."""
    titles = [shorten(r.title, width) for r in results]
    seen: dict[tuple[str, str], list[int]] = {}
    for index, (result, title) in enumerate(zip(results, titles, strict=False)):
        seen.setdefault((result.check_id, title), []).append(index)
    for indices in seen.values():
        if len(indices) > 1:
            for index in indices:
                titles[index] = shorten(_function_words(results[index]), width)
    return titles
