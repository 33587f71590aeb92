"""readiness.html: one self-contained page (inline CSS, charts as inline SVG, no script, no
network), readable on a laptop and printable. Rendered with jinja2 from the readiness document."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from markupsafe import Markup

from ..record.model import PHASES, Verdict
from ..record.text import detail, format_bytes, format_threshold, format_value, measurement_label, outcome_mark
from ..record.verdict import VERDICT_LABELS, VERDICT_SYMBOLS
from .charts import render_chart
from .document import results_of
from .summary import fix_first, key_number_table, structured

TEMPLATE = "readiness.html.j2"


@lru_cache(maxsize=1)
def _environment():
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_triton_ready.report", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True,
    )
    environment.filters.update(
        value=format_value, threshold=format_threshold, label=measurement_label, mark=outcome_mark,
        detail=detail, chart=lambda chart: Markup(render_chart(chart)), bytes=format_bytes, structured=structured,
    )
    environment.globals.update(labels=VERDICT_LABELS, symbols=VERDICT_SYMBOLS, Verdict=Verdict)
    return environment


def render_html(document: dict[str, Any]) -> str:
    results = results_of(document)
    numbered = list(enumerate(results, start=1))
    phases = sorted({r.phase for r in results}, key=lambda p: (PHASES.index(p) if p in PHASES else len(PHASES), p))
    by_phase = [(phase, [(i, r) for i, r in numbered if r.phase == phase]) for phase in phases]
    key_headings, key_rows = key_number_table(document)
    return _environment().get_template(TEMPLATE).render(
        document=document, ctx=document["context"], results=numbered, by_phase=by_phase,
        key_headings=key_headings, key_rows=key_rows, blockers=fix_first(results),
        settings_rows=_settings_rows(document.get("settings", {})),
    )


def _settings_rows(settings: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(name, value, where it came from) for each setting that was given or has a value."""
    sources = settings.get("sources", {})
    rows = []
    for name, value in settings.items():
        if name == "sources" or value in (None, {}, []):
            continue
        rows.append((name, value if isinstance(value, str) else _compact(value), sources.get(name, "")))
    return rows


def _compact(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)
