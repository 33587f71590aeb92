"""The YAML section `operations:` (see docs/operations-security.md), declared once."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from ..yamlschema import Section, setting


class Attestation(Section):
    link: str | None = setting(None, "http(s) URL, or a file relative to the YAML file")
    owner: str | None = setting(None, "who keeps it")
    date: dt.date | None = setting(None, "when it was last done or reviewed (YYYY-MM-DD)")


class Attestations(Section):
    hot_update_runbook: Attestation | None = setting(None, "OPS-1: the hot-update runbook")
    disaster_recovery: Attestation | None = setting(None, "OPS-3: the last disaster-recovery test")
    team_training: Attestation | None = setting(None, "OPS-4: the team's training record")


class DeclaredFleet(Section):
    """`operations.capacity.fleet`: the GPUs the capacity plan must fit (not the replicas under test,
    which are fleet/targets.Fleet)."""

    gpus: int | None = setting(None, "GPUs in the fleet", ge=1)
    instances_per_gpu: dict[str, int] = setting(dict, "instances per GPU, per model (default: as measured)")
    placement: Literal["shared", "dedicated"] = setting(
        "shared", "shared: every GPU serves every model; dedicated: GPUs split by model")


class DeclaredCapacity(Section):
    """`operations.capacity`: the peak the team expects and its fleet (PERF-2 measures the capacity)."""

    peak_rate: dict[str, float] = setting(dict, "expected peak rate per model", unit="infer/s")
    fleet: DeclaredFleet | None = setting(None, "the fleet the plan must fit")


class OperationsSection(Section):
    """`operations:`: attestations a machine cannot prove, and the capacity plan's inputs."""

    attestations: Attestations | None = setting(None, "runbook, disaster-recovery and training records")
    capacity: DeclaredCapacity | None = setting(None, "OPS-2's declared peak and fleet")
