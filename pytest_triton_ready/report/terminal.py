"""The terminal summary: a compact checklist table, one row per check, and the verdict."""

from __future__ import annotations

from .model import Result
from .text import detail, shorten
from .verdict import VERDICT_LABELS

VERDICT_MARKUP = {"pass": {"green": True}, "fail": {"red": True, "bold": True}, "error": {"red": True},
                  "incomplete": {"yellow": True}, "not_applicable": {}}
OVERALL_MARKUP = {"READY": {"green": True, "bold": True}, "NOT READY": {"red": True, "bold": True},
                  "INCOMPLETE": {"yellow": True, "bold": True}}


def checklist_rows(results: list[Result], width: int = 120) -> list[tuple[str, str, dict, str]]:
    """(id and title, verdict, the verdict's markup, detail) per result; an advisory check's
    verdict carries a `*`; the detail is cut to fit `width`."""
    id_width = max([len(r.check_id) for r in results] + [5])
    title_width = 44
    rows = []
    for result in results:
        verdict = VERDICT_LABELS[result.verdict] + ("" if result.blocking else "*")
        head = f"{result.check_id:<{id_width}}  {shorten(result.title, title_width):<{title_width}}  "
        tail = shorten(detail(result), max(width - len(head) - 18, 20))
        rows.append((head, f"{verdict:<16}", VERDICT_MARKUP.get(result.verdict.value, {}), tail))
    return rows
