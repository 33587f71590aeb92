"""The overall verdict of a run, and the roll-up of one checklist item from its checks.

READY       every blocking check passed or had nothing to look at (not applicable).
NOT READY   a blocking check failed: something was measured and it missed its rule.
INCOMPLETE  no blocking check failed, but one could not run, broke, or measured nothing valid,
            so READY cannot be claimed.
Advisory checks (blocking=False) are reported like any other but never decide the verdict.
"""

from __future__ import annotations

from .model import Result, Verdict

READY = "READY"
NOT_READY = "NOT READY"
INCOMPLETE = "INCOMPLETE"
OVERALL_VERDICTS = (READY, NOT_READY, INCOMPLETE)

# Worst first: a checklist item made of several checks shows its worst verdict.
SEVERITY_ORDER = (Verdict.FAIL, Verdict.ERROR, Verdict.INCOMPLETE, Verdict.PASS, Verdict.NOT_APPLICABLE)

VERDICT_LABELS = {
    Verdict.PASS: "pass",
    Verdict.FAIL: "fail",
    Verdict.INCOMPLETE: "incomplete",
    Verdict.NOT_APPLICABLE: "not applicable",
    Verdict.ERROR: "error",
}

# The symbols of a CI job summary: ✓ passed, ✗ failed, – did not decide (skipped, broke, n/a).
VERDICT_SYMBOLS = {
    Verdict.PASS: "✓",
    Verdict.FAIL: "✗",
    Verdict.INCOMPLETE: "–",
    Verdict.NOT_APPLICABLE: "–",
    Verdict.ERROR: "–",
}


def overall_verdict(results: list[Result]) -> str:
    """READY, NOT READY (a blocking check failed) or INCOMPLETE (a blocking check could not run)."""
    blocking = [r for r in results if r.blocking]
    if any(r.verdict == Verdict.FAIL for r in blocking):
        return NOT_READY
    if any(r.verdict in (Verdict.INCOMPLETE, Verdict.ERROR) for r in blocking):
        return INCOMPLETE
    return READY


def verdict_reason(results: list[Result]) -> str:
    """One sentence saying why the overall verdict is what it is."""
    blocking = [r for r in results if r.blocking]
    failed = _ids(r for r in blocking if r.verdict == Verdict.FAIL)
    undecided = _ids(r for r in blocking if r.verdict in (Verdict.INCOMPLETE, Verdict.ERROR))
    if failed:
        text = f"blocking checks failed: {', '.join(failed)}"
        if undecided:
            text += f"; could not run: {', '.join(undecided)}"
        return text
    if undecided:
        return f"blocking checks could not run or broke: {', '.join(undecided)}"
    passed = sum(r.verdict == Verdict.PASS for r in blocking)
    not_applicable = sum(r.verdict == Verdict.NOT_APPLICABLE for r in results)
    text = f"all {passed} blocking checks passed"
    if not_applicable:
        text += f"; {not_applicable} not applicable"
    advisory_failed = _ids(r for r in results if not r.blocking and r.verdict in (Verdict.FAIL, Verdict.ERROR))
    if advisory_failed:
        text += f"; advisory checks failed: {', '.join(advisory_failed)}"
    return text


def worst(verdicts: list[Verdict]) -> Verdict:
    """The verdict a group of checks shows: the worst of its members."""
    return min(verdicts, key=SEVERITY_ORDER.index) if verdicts else Verdict.NOT_APPLICABLE


def verdict_counts(results: list[Result]) -> dict[str, int]:
    """How many checks ended in each verdict (every verdict listed, zeros included)."""
    return {v.value: sum(r.verdict == v for r in results) for v in Verdict}


def checklist(results: list[Result]) -> list[dict]:
    """One row per checklist item (check id), in the order first seen: its worst verdict and checks."""
    items: dict[str, dict] = {}
    for result in results:
        item = items.setdefault(result.check_id, {"check_id": result.check_id, "phase": result.phase,
                                                  "blocking": False, "verdicts": [], "nodeids": []})
        item["blocking"] = item["blocking"] or result.blocking
        item["verdicts"].append(result.verdict)
        item["nodeids"].append(result.nodeid)
    return [
        {"check_id": i["check_id"], "phase": i["phase"], "blocking": i["blocking"],
         "verdict": worst(i["verdicts"]).value, "nodeids": i["nodeids"]}
        for i in items.values()
    ]


def _ids(results) -> list[str]:
    seen: list[str] = []
    for result in results:
        if result.check_id not in seen:
            seen.append(result.check_id)
    return seen
