"""Attestations: what a machine cannot prove, declared in the YAML with a link, an owner and a date.

`operations.attestations.<kind>: {link, owner, date}`. An attestation is accepted when every field
is there, the link is an http(s) URL (not fetched: it may be on an intranet) or a file that exists
(relative to the YAML file), the date is not in the future, and it is no older than the threshold
`attestation_max_age_days`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..record.recorder import CheckRecorder
from ..yamlschema import validate
from .schema import OperationsSection

ATTESTATION_KINDS = {
    "hot_update_runbook": "hot-update runbook",
    "disaster_recovery": "disaster-recovery test record",
    "team_training": "team training record",
}


@dataclass
class AttestationReview:
    """One attestation as found in the settings, and what is wrong with it (empty when accepted)."""

    kind: str
    yaml_key: str
    link: str | None = None
    owner: str | None = None
    date: dt.date | None = None
    age_days: int | None = None
    link_kind: str | None = None  # url | file
    problems: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return ATTESTATION_KINDS[self.kind]

    @property
    def present(self) -> bool:
        return self.date is not None or self.link is not None or self.owner is not None

    @property
    def accepted(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        return (f"{self.label}: link {self.link or '-'} ({self.link_kind or 'missing'}), owner {self.owner or '-'}, "
                f"date {self.date.isoformat() if self.date else '-'}"
                + (f", {self.age_days} days old" if self.age_days is not None else ""))


def review_attestation(operations: OperationsSection | dict[str, Any], kind: str, max_age_days: float,
                       today: dt.date, base_dir: Path | None) -> AttestationReview:
    """Check one attestation of the `operations` YAML section (typed, or the mapping the file
    holds) against the rules above."""
    if kind not in ATTESTATION_KINDS:
        raise KeyError(f"unknown attestation kind {kind!r} (known: {', '.join(ATTESTATION_KINDS)})")
    if not isinstance(operations, OperationsSection):
        operations = validate(OperationsSection, dict(operations), "operations settings", prefix=("operations",))
    key = f"operations.attestations.{kind}"
    entry = getattr(operations.attestations, kind, None) if operations.attestations else None
    review = AttestationReview(kind, key)
    if entry is None or not entry.model_fields_set:
        review.problems.append(f"no {review.label} is declared ({key} with link, owner and date)")
        return review
    review.link = (entry.link or "").strip() or None
    review.owner = (entry.owner or "").strip() or None
    review.date = entry.date
    for name in ("link", "owner", "date"):
        if getattr(review, name) is None:
            review.problems.append(f"{key}.{name} is missing")
    if review.link:
        review.link_kind, problem = _check_link(review.link, base_dir)
        if problem:
            review.problems.append(f"{key}.link: {problem}")
    if review.date is not None:
        review.age_days = (today - review.date).days
        if review.age_days < 0:
            review.problems.append(f"{key}.date {review.date.isoformat()} is in the future")
        elif review.age_days > max_age_days:
            review.problems.append(
                f"the {review.label} is stale: dated {review.date.isoformat()}, {review.age_days} days ago "
                f"(the rule is at most {max_age_days:g} days)"
            )
    return review


def _check_link(link: str, base_dir: Path | None) -> tuple[str, str | None]:
    scheme = urlsplit(link).scheme.lower()
    if scheme in ("http", "https"):
        if not urlsplit(link).netloc:
            return "url", f"{link!r} is not a complete URL"
        return "url", None
    if scheme and len(scheme) > 1:
        return "url", f"{link!r} is neither an http(s) URL nor a file path"
    path = Path(link)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.exists():
        return "file", f"the file {link} does not exist (looked at {path})"
    return "file", None


def record_attestation(check: CheckRecorder, settings: Any, kind: str, today: dt.date | None = None) -> AttestationReview:
    """Review the run's attestation `kind` onto `check`: its age against `attestation_max_age_days`,
    every other problem as an error finding, the record as evidence, a recommendation when it is
    not accepted. A file link is read relative to the YAML file."""
    max_age = check.threshold("attestation_max_age_days")
    base_dir = settings.config_file.parent if settings.config_file else None
    review = review_attestation(settings.section_model("operations"), kind, max_age.value,
                                today or dt.datetime.now(dt.timezone.utc).date(), base_dir)
    if review.age_days is not None:
        check.measure(f"{review.label} age", review.age_days, "days", threshold=max_age,
                      finding=next((p for p in review.problems if "stale" in p), None))
    for problem in review.problems:
        if "stale" not in problem:
            check.finding(problem, rule=review.yaml_key)
    if review.present:
        check.evidence(review.label, review.summary())
    if not review.accepted:
        check.recommend(f"Record the {review.label} under {review.yaml_key} with link, owner and date "
                        f"(YYYY-MM-DD), and renew it at least every {max_age.value:g} days.")
    return review
