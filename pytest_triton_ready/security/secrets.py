"""SEC-4: search texts a run produces for the secret values of its settings.

A secret is reported by its label (the header's name), never by its value. Values too short to be
searched for without matching ordinary text are listed separately.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MIN_SEARCHABLE_CHARS = 6


@dataclass(frozen=True)
class Leak:
    """A secret (named by label) found in one source."""

    secret: str
    source: str


def labelled_secrets(headers: Mapping[str, str], secrets: Iterable[str]) -> dict[str, str]:
    """Each secret under the label a finding may show: `value of header 'X'`, `credential part of
    header 'X'`, or `URL credential` (what the value is, never the value)."""
    labelled = {f"value of header {name!r}": value for name, value in headers.items() if value}
    for value in secrets:
        if value in labelled.values():
            continue
        owner = next((name for name, full in headers.items() if full and full.endswith(value)), None)
        label = f"credential part of header {owner!r}" if owner else "URL credential"
        labelled[label if label not in labelled else f"{label} #{len(labelled)}"] = value
    return labelled


def searchable(secrets: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Split secrets into those long enough to search for and the labels of the rest."""
    long_enough = {label: value for label, value in secrets.items() if len(value) >= MIN_SEARCHABLE_CHARS}
    too_short = sorted(label for label, value in secrets.items() if value and len(value) < MIN_SEARCHABLE_CHARS)
    return long_enough, too_short


def find_leaks(secrets: Mapping[str, str], sources: Iterable[tuple[str, str]]) -> list[Leak]:
    """Every (secret label, source name) where the secret's value occurs in the source's text."""
    leaks = []
    for source, text in sources:
        for label, value in secrets.items():
            if value and value in text:
                leaks.append(Leak(label, source))
    return leaks
