"""readiness.md: the report as a CI job summary. A table of checks (✓ / ✗ / – per row), then each
failure with its findings, recommendations and evidence, then the checks that could not run or
broke (with the reason), the ones that were not applicable, and warnings of the others."""

from __future__ import annotations

from typing import Any

from ..record.model import Result, Verdict
from ..record.text import detail, format_bytes, format_threshold, format_value, measurement_label, shorten
from ..record.verdict import VERDICT_LABELS, VERDICT_SYMBOLS
from .document import results_of
from .summary import fix_first, key_number_table, structured

EVIDENCE_LIMIT = 4000  # characters of one evidence text; job summaries are limited to 1 MiB


def scope_lines(scope: dict[str, Any] | None) -> list[str]:
    """What in the checklist's scope did not run, and the waivers that left checks out."""
    if not scope or not (scope["not_run"] or scope["waived"] or scope["expired_waivers"]):
        return []
    lines = ["", "## Scope", "", f"{scope['ran']} of {scope['in_scope']} checks in scope ran ({scope['source']}).", ""]
    lines += [f"- not run ({e['why']}): **{e['check_id']}** `{e['nodeid']}`" for e in scope["not_run"]]
    lines += [f"- waived: **{e['check_id']}** `{e['nodeid']}`: {e['reason']} (owner {e['owner']}, expires {e['expires']})"
              for e in scope["waived"]]
    lines += [f"- expired waiver: **{e['check']}** (owner {e['owner']}, expired {e['expires']})"
              for e in scope["expired_waivers"]]
    return lines


def render_markdown(document: dict[str, Any]) -> str:
    results = results_of(document)
    items = " · ".join(f"{i['check_id']} {VERDICT_SYMBOLS[Verdict(i['verdict'])]}" for i in document["checklist"])
    lines = [f"# Triton readiness: {document['verdict']}", "",
             f"**{document['verdict']}**: {document['verdict_reason']}.", "", f"Checklist items: {items}", ""]
    lines += key_number_lines(document)
    blockers = fix_first(results)
    if blockers:
        lines += ["## Fix first", ""]
        for b in blockers:
            lines.append(f"1. **{b.check_id}** {_one_line(b.title)}")
            lines += [f"   - {_one_line(m)}" for m in b.messages]
            lines += [f"   - → {_one_line(r)}" for r in b.recommendations]
        lines.append("")
    lines += _context_lines(document)
    lines += ["", "| | Check | Phase | Title | Verdict | Rules judged | Detail |", "|---|---|---|---|---|---|---|"]
    for result in results:
        verdict = VERDICT_LABELS[result.verdict] + ("" if result.blocking else " (advisory)")
        lines.append("| " + " | ".join(_cell(c) for c in (
            VERDICT_SYMBOLS[result.verdict], result.check_id, result.phase, result.title, verdict,
            str(result.rules_judged), shorten(detail(result), 160))) + " |")
    failures = [r for r in results if r.verdict == Verdict.FAIL]
    if failures:
        lines += ["", "## Failures"]
        for result in failures:
            lines += _failure_lines(result)
    undecided = [r for r in results if r.verdict in (Verdict.INCOMPLETE, Verdict.ERROR)]
    if undecided:
        lines += ["", "## Could not run", ""]
        lines += [f"- – **{r.check_id}** {r.title} ({VERDICT_LABELS[r.verdict]}): {_one_line(r.reason or '')}"
                  for r in undecided]
    lines += scope_lines(document.get("scope"))
    if document.get("plan"):
        lines += ["", "## Run plan", "", "```", *document["plan"], "```"]
    not_applicable = [r for r in results if r.verdict == Verdict.NOT_APPLICABLE]
    if not_applicable:
        lines += ["", "## Not applicable", ""]
        lines += [f"- – **{r.check_id}** {r.title}: {_one_line(r.reason or '')}" for r in not_applicable]
    warnings = [(r, f) for r in results if r.verdict not in (Verdict.FAIL, Verdict.ERROR)
                for f in r.findings if f.severity == "warning"]
    if warnings:
        lines += ["", "## Warnings", ""]
        lines += [f"- **{r.check_id}** {_one_line(f.message)}" for r, f in warnings]
    lines += ["", f"<sub>pytest-triton-ready {document['context'].get('runner', {}).get('pytest_triton_ready', '?')}, "
                  f"report schema {document['schema_version']}. Full report: readiness.html.</sub>", ""]
    return "\n".join(lines)


def key_number_lines(document: dict[str, Any]) -> list[str]:
    """The key numbers per model, with the change against the baseline where there is one."""
    headings, rows = key_number_table(document)
    if not headings:
        return []
    baseline = document.get("baseline") or {}
    lines = ["## Key numbers", ""]
    if baseline.get("key_numbers") is not None:
        lines += [f"Change against the baseline `{baseline['path']}` ({baseline.get('started_at')}) in brackets.", ""]
    elif baseline.get("error"):
        lines += [f"Baseline not usable: {_one_line(baseline['error'])}", ""]
    lines += ["| Model | " + " | ".join(headings) + " |", "|---" * (len(headings) + 1) + "|"]
    for model, cells in rows:
        lines.append(f"| {_cell(model)} | " + " | ".join(
            _cell(c.text + (f" ({'**' + c.delta + '**' if c.tone == 'worse' else c.delta})" if c.delta else ""))
            for c in cells) + " |")
    return lines + [""]


def _context_lines(document: dict[str, Any]) -> list[str]:
    context = document["context"]
    server = context.get("server")
    if server:
        where = (context.get("endpoints") or {}).get("http_url")
        text = f"{server.get('name') or 'triton'} {server.get('version')}" + (f" at {where}" if where else "")
    else:
        text = f"not reached ({context.get('server_error', 'no check opened the server')})"
    models = ", ".join(
        f"{m['name']} v{m.get('version') or '?'} ({m.get('state') or '?'})" for m in context.get("models", [])
    ) or "none listed"
    gpus = context.get("gpus", {})
    gpu_text = (", ".join(f"{g['name']} ({format_bytes(g.get('memory_total_bytes'))})" for g in gpus.get("gpus", []))
                + f", read from {gpus.get('source')}"
                if gpus.get("gpus") else f"none visible: {gpus.get('unavailable_reason')}")
    return [
        f"- **Server**: {text}",
        f"- **Models**: {models}",
        f"- **GPUs**: {gpu_text}",
        f"- **Run**: {document['started_at']} to {document.get('finished_at') or '?'}, "
        f"{document['summary']['total']} checks",
    ]


def _failure_lines(result: Result) -> list[str]:
    lines = ["", f"### ✗ {result.check_id}: {result.title}", "", f"`{result.nodeid}` ({VERDICT_LABELS[result.verdict]})"]
    errors = [f for f in result.findings if f.severity == "error"]
    if errors:
        lines += ["", "Findings:", ""] + [f"- {_one_line(f.message)}"
                                          + (f" *(rule {f.rule})*" if f.rule and f.rule != result.check_id else "")
                                          for f in errors]
    if result.reason and not errors:
        lines += ["", f"Reason: {_one_line(result.reason)}"]
    missed = [m for m in result.measurements if m.passed is False]
    if missed:
        lines += ["", "| Measurement | Value | Rule | Threshold from |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(_cell(c) for c in (measurement_label(m), format_value(m.value, m.unit),
                                                         format_threshold(m), m.threshold_source or "")) + " |"
                  for m in missed]
    if result.recommendations:
        lines += ["", "Recommendations:", ""] + [f"- {r}" for r in result.recommendations]
    for item in result.evidence:
        shape, body = structured(item.text)
        lines += ["", f"<details><summary>Evidence: {_html_text(item.label)}</summary>", ""]
        if shape == "dl":
            lines += ["| | |", "|---|---|"] + [f"| {_cell(k)} | {_cell(v)} |" for k, v in body]
        elif shape == "table":
            headings, rows = body
            lines += ["| " + " | ".join(_cell(h) for h in headings) + " |", "|" + "---|" * len(headings)]
            lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
        else:
            text = item.text if len(item.text) <= EVIDENCE_LIMIT else item.text[-EVIDENCE_LIMIT:]
            lines += ["```text", text.replace("```", "`\u200b``"), "```"]
        lines += ["", "</details>"]
    return lines


def _one_line(text: str) -> str:
    """A message as one Markdown line (a multi-line message would break the list it is in)."""
    return " ".join(str(text).split())


def _cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|")


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
