"""What the report leads with: key numbers per model (with deltas against a baseline), the blocking
findings to fix first, each passing check's key number, and evidence as tables instead of text."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

from ..baseline.keynumbers import METRICS, model_label, ordered_models
from ..record.model import Result, Verdict
from ..record.text import headline

KEY_COLUMNS = tuple(m for m in METRICS)


@dataclass
class Cell:
    text: str
    delta: str = ""
    tone: str = ""  # "worse" | "better" | ""


def _value(value: float, unit: str, share: bool = False) -> str:
    """A key number without its unit (the column heading carries it); a share of a whole (an error
    rate) as percent, any other ratio (last/first) as the ratio it is."""
    if unit == "ratio" and share and abs(value) < 1:
        return f"{value:.3%}" if value and abs(value) < 0.001 else f"{value:.2%}" if value else "0 %"
    return f"{value:.4g}"


def key_number_table(document: dict[str, Any]) -> tuple[list[str], list[tuple[str, list[Cell]]]]:
    """(column headings, rows of (model, cells)) of the metrics any model has; deltas when the
    document carries a baseline's key numbers."""
    numbers = document.get("key_numbers") or {}
    base = ((document.get("baseline") or {}).get("key_numbers")) or {}
    metrics = [m for m in KEY_COLUMNS if any(m.key in row for row in numbers.values())]
    rows = []
    for model in ordered_models(numbers):
        cells = []
        for metric in metrics:
            value = numbers[model].get(metric.key)
            if value is None:
                cells.append(Cell("—"))
                continue
            cell = Cell(_value(value, metric.unit, metric.share))
            then = (base.get(model) or {}).get(metric.key)
            if then is not None:
                if metric.relative and then:
                    change = value / then - 1
                    cell.delta = f"{change:+.1%}"
                else:
                    change = value - then
                    cell.delta = f"{change:+.3g}" + ("" if metric.unit == "ratio" else f" {metric.unit}")
                worse = -change if metric.better == "higher" else change
                small = 0.02 if metric.relative else 1e-9  # changes below 2 % are not coloured
                cell.tone = "worse" if worse > small else ("better" if worse < -small else "")
            cells.append(cell)
        rows.append((model_label(model), cells))
    return [f"{m.label} ({m.unit})" if m.unit != "ratio" else m.label for m in metrics], rows


@dataclass
class Blocker:
    check_id: str
    title: str
    anchor: int
    messages: list[str]
    recommendations: list[str]


def fix_first(results: list[Result]) -> list[Blocker]:
    """The blocking failures (and broken checks), each with its error findings and recommendations."""
    blockers = []
    for number, result in enumerate(results, start=1):
        if not result.blocking or result.verdict not in (Verdict.FAIL, Verdict.ERROR):
            continue
        messages = [f.message for f in result.findings if f.severity == "error"] or [result.reason or "failed"]
        blockers.append(Blocker(result.check_id, result.title, number, messages, list(result.recommendations)))
    return blockers


def structured(text: str) -> tuple[str, Any]:
    """Evidence text as ("dl", [(key, value)]), ("table", (headings, rows)) or ("text", text):
    a JSON object or Python literal becomes a definition list, a list of like records a table."""
    data = _parse(text)
    if isinstance(data, dict) and data:
        return "dl", [(key, _compact(value)) for key, value in _flatten(data)]
    if isinstance(data, list) and data and all(isinstance(row, dict) for row in data):
        headings: list[str] = []
        for row in data:
            headings += [k for k in row if k not in headings]
        return "table", (headings, [[_compact(row.get(h)) for h in headings] for row in data])
    return "text", text


def _parse(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    try:
        return ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _flatten(data: dict[str, Any], prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and depth < 2:
            items += _flatten(value, f"{name}.", depth + 1)
        else:
            items.append((name, value))
    return items


def _compact(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, dict) and not value:
        return "none"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


__all__ = ["headline"]  # headline lives in record/text.py
