"""Baselines: a previous run's readiness.json that PERF-5 compares this run with.

`load_baseline(path)` takes a readiness.json, a report directory holding one, or a directory of
runs (each a report directory, or readiness.json files anywhere below): from a directory of runs
the newest READY one is taken. `environment_differences(this, baseline)` names what makes the two
runs differ beyond the code under test (server version, GPUs, model versions, model configs), so
that a comparison across them carries a warning naming each difference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TritonReadyError
from ..server.models import same_digest
from .compare import IMPROVED, NOT_REPRODUCED, OK, REGRESSION, REPEATABLE, WITHIN_NOISE, Comparison, compare, reconsider
from .keynumbers import ALL, METRICS, config_digests, key_numbers, model_label, ordered_models

__all__ = ["ALL", "Baseline", "BaselineError", "Comparison", "IMPROVED", "METRICS", "NOT_REPRODUCED", "OK", "REGRESSION",
           "REPEATABLE", "WITHIN_NOISE", "compare", "config_digests", "environment_differences", "find_runs",
           "key_numbers", "load_baseline", "model_label", "ordered_models", "read_report", "reconsider"]


class BaselineError(TritonReadyError, ValueError):
    """The baseline could not be used; the message names the path and the cause."""


@dataclass
class Baseline:
    document: dict[str, Any]
    path: Path

    @property
    def label(self) -> str:
        return f"{self.path} ({self.document.get('verdict')}, {self.document.get('started_at')})"


def read_report(path: Path) -> dict[str, Any]:
    """A readiness document from a file; BaselineError naming the file when it is not one."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(document, dict) or document.get("kind") != "triton-readiness":
        raise BaselineError(f"{path}: not a readiness report (no kind 'triton-readiness')")
    return document


def find_runs(directory: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every readable readiness report in `directory` (itself or below), oldest first by start time."""
    directory = Path(directory)
    paths = sorted(directory.glob("readiness.json")) + sorted(directory.glob("**/readiness.json"))
    runs, seen = [], set()
    for path in paths:
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        try:
            runs.append((path, read_report(path)))
        except BaselineError:
            continue
    runs.sort(key=lambda run: (str(run[1].get("started_at") or ""), str(run[0])))
    return runs


def load_baseline(path: Path, exclude: Path | None = None) -> Baseline:
    """The baseline named by `path`: a file, a report directory, or the newest READY run in a
    directory of runs (`exclude`: this run's own report directory, never its own baseline)."""
    path = Path(path)
    if path.is_file():
        return Baseline(read_report(path), path)
    if not path.is_dir():
        raise BaselineError(f"{path}: no such file or directory")
    runs = find_runs(path)
    if exclude is not None:
        runs = [(p, d) for p, d in runs if p.parent.resolve() != Path(exclude).resolve()]
    if not runs:
        raise BaselineError(f"{path}: no readiness.json in this directory or below")
    ready = [(p, d) for p, d in runs if d.get("verdict") == "READY"]
    if not ready:
        raise BaselineError(f"{path}: none of the {len(runs)} runs found is READY; name a file to compare "
                            "with a run that was not")
    chosen_path, document = ready[-1]
    return Baseline(document, chosen_path)


def _describe_gpus(context: dict[str, Any]) -> str:
    gpus = (context.get("gpus") or {}).get("gpus") or []
    return ", ".join(sorted(str(g.get("name")) for g in gpus)) or "none"


def environment_differences(current: dict[str, Any], baseline: dict[str, Any],
                            current_digests: dict[str, str] | None = None) -> list[str]:
    """One sentence per difference between the runs' environments: server version, GPUs, model
    versions, model configs (where both runs recorded a digest)."""
    mine, theirs = current.get("context") or {}, baseline.get("context") or {}
    differences = []
    version_now = (mine.get("server") or {}).get("version")
    version_then = (theirs.get("server") or {}).get("version")
    if version_now != version_then:
        differences.append(f"server version {version_now} here, {version_then} in the baseline")
    gpus_now, gpus_then = _describe_gpus(mine), _describe_gpus(theirs)
    if gpus_now != gpus_then:
        differences.append(f"GPUs {gpus_now} here, {gpus_then} in the baseline")
    versions_now = {m.get("name"): m.get("version") for m in mine.get("models") or [] if m.get("state") == "READY"}
    versions_then = {m.get("name"): m.get("version") for m in theirs.get("models") or [] if m.get("state") == "READY"}
    for model in sorted(set(versions_now) & set(versions_then)):
        if versions_now[model] != versions_then[model]:
            differences.append(f"{model}: version {versions_now[model]} here, {versions_then[model]} in the baseline")
    digests_now = current_digests if current_digests is not None else config_digests(current)
    digests_then = config_digests(baseline)
    for model in sorted(set(digests_now) & set(digests_then)):
        if not same_digest(str(digests_now[model]), str(digests_then[model])):
            differences.append(f"{model}: model config differs from the baseline's")
    return differences
