"""The readiness document: the JSON form of a run that every other format is rendered from.

`build_document(run)` turns a Run's Results and context into it; `readiness.json` is this document
as written, and `triton-ready report` renders Markdown and HTML from it again.
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

from ..baseline.keynumbers import key_numbers
from ..record.model import SCHEMA_VERSION, Result
from ..record.verdict import checklist, verdict_counts
from ..run_context import runner_versions

DOCUMENT_KIND = "triton-readiness"


def build_document(run) -> dict[str, Any]:
    """The whole report of one run, JSON-ready, with every secret value replaced by ***."""
    results: list[Result] = list(run.results)
    context = dict(run.context or run.collect_context())
    context["runner"] = {**runner_versions(), **context.get("runner", {})}
    document = {
        "schema_version": SCHEMA_VERSION,
        "kind": DOCUMENT_KIND,
        "verdict": run.verdict(),
        "verdict_reason": run.verdict_reason(),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "summary": {"total": len(results), **verdict_counts(results)},
        "checklist": checklist(results),
        "context": context,
        "settings": run.settings.redacted(),
        "results": [r.to_dict() for r in results],
    }
    if run.scope is not None:
        document["scope"] = run.scope.to_dict(run.recorded())
    if run.plan:
        document["plan"] = run.plan
    if run.facts:  # what checks left for later ones: capacity, the capacity plan, experiments, live layers
        document["facts"] = run.facts.to_json()
    document["key_numbers"] = key_numbers(results)
    baseline = baseline_summary(getattr(run.settings, "triton_baseline", None), run.settings.readiness_report)
    if baseline is not None:
        document["baseline"] = baseline
    return run.settings.redactor().value(json_ready(document))


def baseline_summary(path, own_report_dir=None) -> dict[str, Any] | None:
    """The baseline's identity and key numbers for the report's deltas (None without a baseline)."""
    if path is None:
        return None
    from ..baseline import BaselineError, load_baseline

    try:
        baseline = load_baseline(path, exclude=own_report_dir)
    except BaselineError as exc:
        return {"path": str(path), "error": str(exc)}
    return {"path": str(baseline.path), "verdict": baseline.document.get("verdict"),
            "started_at": baseline.document.get("started_at"), "key_numbers": key_numbers(baseline.document)}


def results_of(document: dict[str, Any]) -> list[Result]:
    return [Result.from_dict(r) for r in document.get("results", [])]


def dumps(document: dict[str, Any]) -> str:
    """The document as readiness.json text: strict JSON (no NaN), keys in a fixed order."""
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def json_ready(value: Any) -> Any:
    """Plain JSON types only: tuples become lists, numpy scalars Python numbers, paths and other
    objects their text, and a non-finite float its name ("nan", "inf"): strict JSON has no NaN."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if value is None or isinstance(value, (bool, str)):
        return value
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):  # numpy scalars and arrays
        return json_ready(value.tolist())
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    if hasattr(value, "value") and isinstance(value.value, str):  # enums
        return value.value
    return str(value)
