"""CFG-5: every replica serves the same models, the same versions and the same configuration.

A half-finished rollout leaves replicas that answer the same request with different models; the
balancer hides which one a client reached. Each replica is read directly (repository index and
effective model configs); every field is compared across replicas, and a difference is a finding
that names the replica and the field. The reference value of a field is the one most replicas
have; with a tie (two replicas, two values) every value is listed with its replicas.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..record.recorder import CheckRecorder

# Config fields that legitimately differ per replica, never compared.
IGNORED_CONFIG_PATHS = frozenset()


@dataclass
class ReplicaView:
    """What one replica serves: model -> READY versions, model -> effective config."""

    replica: str
    versions: dict[str, list[str]] = field(default_factory=dict)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    server_version: str | None = None
    error: str | None = None  # the replica could not be read at all


@dataclass(frozen=True)
class Difference:
    """One field that is not the same on every replica."""

    model: str | None
    path: str
    values: dict[str, str]  # replica -> value as shown
    outliers: tuple[str, ...]  # the replicas that differ from the majority (all, on a tie)

    def message(self) -> str:
        where = f"{self.model}: " if self.model else ""
        groups: dict[str, list[str]] = {}
        for replica, value in self.values.items():
            groups.setdefault(value, []).append(replica)
        if len(self.outliers) < len(self.values):
            majority = max(groups.items(), key=lambda kv: len(kv[1]))
            parts = [f"replica {r} has {where}{self.path} = {self.values[r]}" for r in self.outliers]
            return "; ".join(parts) + f" where {', '.join(majority[1])} {'has' if len(majority[1]) == 1 else 'have'} " \
                                      f"{majority[0]}"
        shown = "; ".join(f"{', '.join(rs)}: {v}" for v, rs in groups.items())
        return f"{where}{self.path} differs between replicas ({shown})"


def read_view(name: str, client: Any, models: Iterable[str] | None = None) -> ReplicaView:
    """A replica's view from its own HTTP API (repository index, configs, server version)."""
    view = ReplicaView(name)
    try:
        view.server_version = client.server_metadata().get("version")
        index = client.repository_index()
    except Exception as exc:  # unreachable replica: one line, the consistency check names it
        view.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return view
    wanted = set(models) if models else None
    for entry in index:
        model = entry.get("name")
        if wanted is not None and model not in wanted:
            continue
        versions = view.versions.setdefault(model, [])
        if entry.get("state") == "READY":
            versions.append(str(entry.get("version") or "?"))
    for model, versions in view.versions.items():
        versions.sort(key=lambda v: (len(v), v))
        if versions:
            try:
                view.configs[model] = client.model_config(model, fresh=True)
            except Exception as exc:
                view.configs[model] = {"<unreadable>": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    return view


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """A config as dotted paths -> JSON text of each leaf (lists of mappings by index)."""
    out: dict[str, str] = {}
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = "{}"
        for key in sorted(value):
            out.update(flatten(value[key], f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{i}]"))
        if not value:
            out[prefix] = "[]"
    else:
        out[prefix] = json.dumps(value, sort_keys=True)
    return out


def _difference(model: str | None, path: str, values: dict[str, str]) -> Difference | None:
    if len(set(values.values())) <= 1:
        return None
    counts = Counter(values.values())
    ranked = counts.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        outliers = tuple(values)
    else:
        outliers = tuple(r for r, v in values.items() if v != ranked[0][0])
    return Difference(model, path, values, outliers)


def replica_differences(views: list[ReplicaView]) -> list[Difference]:
    """Every field that differs between the replicas that could be read."""
    readable = [v for v in views if v.error is None]
    if len(readable) < 2:
        return []
    differences: list[Difference] = []
    server = {v.replica: str(v.server_version) for v in readable}
    found = _difference(None, "server version", server)
    if found:
        differences.append(found)
    models = sorted({m for v in readable for m in v.versions})
    for model in models:
        served = {v.replica: ", ".join(v.versions.get(model) or []) or "not served" for v in readable}
        found = _difference(model, "READY versions", served)
        if found:
            differences.append(found)
        flat = {v.replica: flatten(v.configs[model]) for v in readable if model in v.configs}
        if len(flat) < 2:
            continue
        for path in sorted({p for f in flat.values() for p in f} - IGNORED_CONFIG_PATHS):
            found = _difference(model, f"config {path}", {r: f.get(path, "absent") for r, f in flat.items()})
            if found:
                differences.append(found)
    return differences


def record_consistency(check: CheckRecorder, views: list[ReplicaView]) -> None:
    """CFG-5 onto a check: each replica's view (or why it could not be read), every field that
    differs between the replicas as a finding naming the outliers; INCOMPLETE with fewer than two
    readable replicas."""
    for view in views:
        if view.error:
            check.finding(f"replica {view.replica}: could not be read: {view.error}", model=view.replica)
        else:
            check.measure("models served", len([m for m, v in view.versions.items() if v]), "models", model=view.replica)
    if len([v for v in views if not v.error]) < 2:
        check.incomplete("fewer than two replicas could be read; nothing to compare")
    differences = replica_differences(views)
    check.measure("fields that differ between replicas", len(differences), "fields", threshold=0)
    for difference in differences:
        check.finding(difference.message(), model=", ".join(difference.outliers), rule="CFG-5",
                      value=difference.path)
    check.evidence("what each replica serves", json.dumps(
        {v.replica: {"server version": v.server_version, "READY versions": v.versions} for v in views}, indent=1))
    if differences:
        check.recommend("Finish (or roll back) the rollout so that every replica serves the same model versions "
                        "and configuration; a client cannot tell which replica answered.")
