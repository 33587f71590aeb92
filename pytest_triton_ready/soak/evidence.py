"""Soak evidence: a nightly soak's record standing as PERF-3's leak judgement in a release run.

A release gate cannot soak for the hours a leak needs; a nightly job can. `--triton-soak-evidence`
(YAML `soak.evidence`) names that soak's readiness.json, its report directory, or its soak journal.
The evidence is accepted only when all of these hold, each compared in this run:

- its server identity (soak/identity.py) is this server's: the server version; every model the
  server holds (decoupled and out-of-scope ones too) with the same READY versions, effective config
  and a digest of every file (config and served versions) where the repository is readable here;
  the same launcher, image and launch arguments where known; files or launch arguments that could
  be read on one side only, or on neither, are a difference, never a silent match;
- it soaked every model this run would soak at no less than this run's planned rate;
- it finished no later than now (FUTURE_TOLERANCE_S of clock skew allowed) and is not older than
  `soak_evidence_max_age_h`, counted from the end of that soak;
- that soak ran at least `soak_leak_min_duration_s` (this run's value) and judged the leak rule;
- its PERF-3 passed.

Otherwise `judge` returns the differences, each naming what differs, and PERF-3 stays INCOMPLETE.
An identity of an older format (without file digests, launch and rates) is refused asking for a
new soak. The soak check records the identity it ran against in its Result and journal, so that
its report can serve as evidence later. With the soak turned off (`--triton-soak=0`), accepted
evidence judges PERF-3 on its own (`judge_on_evidence`), this run's latency drift not claimed.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TritonReadyError
from .identity import differences

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder

IDENTITY_LABEL = "soak server identity"
EVIDENCE_LABEL = "soak evidence"
LEAK_RULES = ("server-memory-leak", "host-memory-leak", "gpu-memory-leak", "streaming-memory-leak")
UNARY_SOAK = "test_soak_stability"  # the two PERF-3 soaks a report can hold, by their check's name
STREAM_SOAK = "test_streaming_soak_every_request_finishes"
DURATION_RUN = "soak duration run"
FUTURE_TOLERANCE_S = 60.0  # clock skew between the nightly's host and this one


class EvidenceError(TritonReadyError, ValueError):
    """The evidence file cannot be read as a soak's record; the message names the file and why."""


@dataclass
class SoakEvidence:
    """The parts of a finished soak's record that decide whether it can stand as evidence."""

    path: Path
    identity: dict[str, Any] | None
    verdict: str
    ran_s: float | None
    leak_judged: bool
    finished_at: str | None

    def describe(self) -> str:
        ran = f"{self.ran_s:.0f} s" if self.ran_s is not None else "an unknown duration"
        version = (self.identity or {}).get("server_version", "?")
        return (f"{self.path} (PERF-3 {self.verdict.upper()}, a soak of {ran} finished {self.finished_at}, "
                f"server {version}, {len((self.identity or {}).get('models', {}))} models)")


def load_evidence(path: str | Path, soak: str = UNARY_SOAK) -> SoakEvidence:
    """Read a readiness.json, a report directory holding one, or a soak journal (the unary soak's
    only); `soak` names the PERF-3 check whose record is wanted (UNARY_SOAK or STREAM_SOAK)."""
    path = Path(path)
    if path.is_dir():
        path = path / "readiness.json"
    if not path.is_file():
        raise EvidenceError(f"soak evidence {path}: no such file")
    from .journal import JournalError, is_journal

    if is_journal(path):
        if soak != UNARY_SOAK:
            raise EvidenceError(f"soak evidence {path}: a soak journal records the soak of {UNARY_SOAK}, not "
                                f"{soak}; name the nightly's readiness.json")
        try:
            return _from_journal(path)
        except JournalError as exc:
            raise EvidenceError(f"soak evidence {path}: {exc}") from None
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvidenceError(f"soak evidence {path}: not a readiness.json nor a soak journal ({exc})") from None
    if not isinstance(document, dict) or "results" not in document:
        raise EvidenceError(f"soak evidence {path}: not a readiness.json (no results) nor a soak journal")
    soaks = [r for r in document["results"] if r.get("check_id") == "PERF-3"
             and str(r.get("nodeid", "")).split("::")[-1].split("[")[0] == soak
             and any(e.get("label") == IDENTITY_LABEL for e in r.get("evidence", []))]
    if not soaks:
        raise EvidenceError(f"soak evidence {path}: its report holds no PERF-3 soak ({soak}) that recorded the "
                            f"server it ran against ({IDENTITY_LABEL})")
    result = soaks[0]
    identity_text = next(e["text"] for e in result["evidence"] if e.get("label") == IDENTITY_LABEL)
    return SoakEvidence(path, _identity(identity_text, path), result.get("verdict", "?"),
                        _duration_run(result.get("measurements", [])), _leak_judged(result.get("judgements", [])),
                        document.get("finished_at"))


def _from_journal(path: Path) -> SoakEvidence:
    from .journal import read_journal
    from .record import result_from_journal

    journal = read_journal(path)
    result = result_from_journal(journal)
    finished = (journal.end or {}).get("finished_at")
    data = result.to_dict()
    return SoakEvidence(path, journal.header.get("server_identity"), result.verdict.value,
                        _duration_run(data["measurements"]), _leak_judged(data["judgements"]), finished)


def _identity(text: str, path: Path) -> dict[str, Any]:
    try:
        identity = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvidenceError(f"soak evidence {path}: its {IDENTITY_LABEL} is not JSON ({exc})") from None
    if not isinstance(identity, dict):
        raise EvidenceError(f"soak evidence {path}: its {IDENTITY_LABEL} is not a mapping")
    return identity


def _duration_run(measurements: list[dict[str, Any]]) -> float | None:
    """How long the soak ran: the shortest of its runs (a stream soak records one per model)."""
    runs = [float(m["value"]) for m in measurements if m.get("name") == DURATION_RUN
            and isinstance(m.get("value"), (int, float))]
    return min(runs) if runs else None


def _leak_judged(judgements: list[dict[str, Any]]) -> bool:
    return any(j.get("rule") in LEAK_RULES for j in judgements)


def evidence_problems(evidence: SoakEvidence, current: dict[str, Any], *, max_age_h: float, leak_min_s: float,
          now: dt.datetime | None = None) -> list[str]:
    """Every difference that keeps `evidence` from standing for the server `current` describes;
    empty when it is accepted."""
    problems: list[str] = []
    if evidence.verdict != "pass":
        problems.append(f"its PERF-3 verdict is {evidence.verdict.upper()}, not PASS")
    if evidence.ran_s is None or evidence.ran_s < leak_min_s:
        ran = "an unknown time" if evidence.ran_s is None else f"{evidence.ran_s:.0f} s"
        problems.append(f"it soaked {ran}, less than soak_leak_min_duration_s = {leak_min_s:.0f} s")
    elif not evidence.leak_judged:
        problems.append("it did not judge the memory-leak rule")
    problems += _age(evidence.finished_at, max_age_h, now or dt.datetime.now(dt.timezone.utc))
    if not evidence.identity:
        return problems + ["it records no server identity (server version, models, files, launch) to compare"]
    return problems + differences(evidence.identity, current)


def _age(finished_at: str | None, max_age_h: float, now: dt.datetime) -> list[str]:
    if not finished_at:
        return ["it records no time its soak finished, so its age is unknown"]
    try:
        finished = dt.datetime.fromisoformat(finished_at)
    except ValueError:
        return [f"its finish time {finished_at!r} is not an ISO 8601 time"]
    if finished.tzinfo is None:
        finished = finished.replace(tzinfo=dt.timezone.utc)
    age_h = (now - finished).total_seconds() / 3600
    if age_h * 3600 < -FUTURE_TOLERANCE_S:
        return [f"its finish time {finished_at} is {-age_h:.1f} h in the future (now {now.isoformat(timespec='seconds')}):"
                " a clock that is wrong there or here, so its age is unknown"]
    if age_h > max_age_h:
        return [f"it is {age_h:.1f} h old, older than soak_evidence_max_age_h = {max_age_h:g} h"]
    return []


def stand_in(check: CheckRecorder, path: str | Path | None, identity: dict[str, Any], limits: dict[str, Any],
             unjudged: list[str], soak: str = UNARY_SOAK) -> list[str]:
    """Let the soak evidence at `path` judge the leak rule this run's soak could not; returns what
    stays unjudged (empty when the evidence is accepted). Accepted or refused, the report names
    and links the evidence."""
    if not path:
        return unjudged
    evidence, refusal = _weigh(check, path, identity, limits, soak)
    if refusal:
        return [*unjudged, refusal]
    check.caveat(f"the memory-leak rule is judged by the soak evidence {evidence.path}")
    return []


def judge_on_evidence(check: CheckRecorder, path: str | Path, identity: dict[str, Any], limits: dict[str, Any],
                      soak: str = UNARY_SOAK, switch: str = "--triton-soak=0") -> str | None:
    """With this run's soak turned off (by `switch`), let the evidence at `path` judge PERF-3 as a
    whole: None when it is accepted (judged and cited), else why it is refused."""
    evidence, refusal = _weigh(check, path, identity, limits, soak)
    if refusal:
        return f"the soak is turned off ({switch}) and {refusal}"
    check.caveat(f"PERF-3 is judged by the soak evidence {evidence.path} alone: this run did not soak "
                 f"({switch}), so this run's latency drift, success rate and "
                 f"{'stuck streams' if soak == STREAM_SOAK else 'pending requests'} under steady load are not claimed")
    return None


def _weigh(check: CheckRecorder, path: str | Path, identity: dict[str, Any], limits: dict[str, Any],
           soak: str) -> tuple[SoakEvidence | None, str | None]:
    """The evidence and None once accepted (the judgement `soak-evidence` recorded), or why not."""
    try:
        evidence = load_evidence(path, soak)
    except EvidenceError as exc:
        return None, str(exc)
    check.evidence(EVIDENCE_LABEL, evidence.describe())
    problems = evidence_problems(evidence, identity, max_age_h=limits["soak_evidence_max_age_h"].value,
                     leak_min_s=limits["soak_leak_min_duration_s"].value)
    if problems:
        return evidence, f"soak evidence {evidence.path} refused: " + "; ".join(problems)
    check.judge("soak-evidence", True, measured=f"this server's {_compared(identity)} against {evidence.describe()}")
    return evidence, None


def _compared(identity: dict[str, Any]) -> str:
    models = identity.get("models") or {}
    files = sum(len(m.get("files") or {}) for m in models.values())
    launch = identity.get("launch") or {}
    how = (f", launch arguments{' and image' if launch.get('image') else ''} ({launch.get('launcher')} server)"
           if launch else "")
    soaked = len(identity.get("soak_rates_infer_s") or {}) + len(identity.get("soak_streams") or {})
    return (f"version, {len(models)} models' READY versions, configs and {files} file digests{how}, and the "
            f"soak rates of {soaked} models")
