"""The terminal summary: a compact checklist table, one row per check, and the verdict.

A passing check takes one line; a check that did not pass gets a second, indented line saying
why (its first finding, or the reason it could not run), since that is what a reader acts on.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..record.model import Result, Verdict
from ..record.text import detail, shorten
from ..record.verdict import VERDICT_LABELS

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
    """The table's rows, cut to fit `width` columns. A row names its check by id and short name
    (the test function's words, `short_names`); the full title is the report's."""
    id_width = max([len(r.check_id) for r in results] + [5])
    verdicts = [VERDICT_LABELS[r.verdict] + ("" if r.blocking else "*") for r in results]
    verdict_width = max(len(v) for v in verdicts) + 2 if verdicts else 8
    room = max(20, width - id_width - verdict_width - 24)  # at least 20 columns stay for what decided a pass
    names = short_names(results)
    title_width = min(max([len(n) for n in names] + [10]), room)
    indent = " " * (id_width + 2)
    rows = []
    for result, verdict, name in zip(results, verdicts, names, strict=False):
        head = f"{result.check_id:<{id_width}}  {fit_width(name, title_width):<{title_width}}  "
        text = detail(result)
        passed = result.verdict == Verdict.PASS
        tail = shorten(text, max(width - len(head) - verdict_width, 10)) if passed else ""
        why = "" if passed or not text else indent + shorten(text, max(width - len(indent), 20))
        rows.append(Row(head, f"{verdict:<{verdict_width}}", VERDICT_MARKUP.get(result.verdict.value, {}), tail, why))
    return rows


def short_name(result: Result) -> str:
    """'gpu memory headroom' from a nodeid ending in ::test_gpu_memory_headroom[...]; the title
    for a result without a test function."""
    if "::" not in result.nodeid:
        return " ".join(result.title.split())
    name = result.nodeid.split("::")[-1].split("[")[0]
    return name.removeprefix("test_").replace("_", " ")


def short_names(results: list[Result]) -> list[str]:
    """Each row's short name; a function that gives several rows (parametrized) adds its
    parameters, so no two rows read the same."""
    names = [short_name(r) for r in results]
    counts: dict[tuple[str, str], int] = {}
    for result, name in zip(results, names, strict=False):
        counts[(result.check_id, name)] = counts.get((result.check_id, name), 0) + 1
    out = []
    for result, name in zip(results, names, strict=False):
        param = result.nodeid.split("[", 1)[1].rstrip("]") if "[" in result.nodeid else ""
        out.append(f"{name} [{param}]" if counts[(result.check_id, name)] > 1 and param else name)
    return out


def fit_width(text: str, width: int) -> str:
    """`text` in `width` columns, cut at a word boundary with an ellipsis when it is longer."""
    if len(text) <= width:
        return text
    cut = text[: width - 1].rsplit(" ", 1)[0] if " " in text[: width - 1] else text[: width - 1]
    return cut.rstrip() + "…"
