"""One rule of a deployment judged against this run: the verdict, the named threshold, the measured
number, the manifest's value with its file and field, and the fix; and what the run measured
(`Measured`), each number None where it was not measured, with the reason."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..thresholds import ThresholdValue
from .reading import TritonContainer

PASS, FAIL, INCOMPLETE, NOT_APPLICABLE = "pass", "fail", "incomplete", "not applicable"


@dataclass(frozen=True)
class Measured:
    """What this run measured that a manifest is held against; `missing` says, per field left
    None, what did not measure it."""

    start_to_ready_s: float | None = None  # PERF-4 crash + restart: from SIGKILL until ready
    drain_s: float | None = None  # PERF-4 SIGTERM under traffic: from the signal until the exit
    refused_after_sigterm: int | None = None
    peak_rss_bytes: float | None = None  # PERF-3: the server's process tree
    memory_slope_mb_h: float | None = None  # PERF-3: the fitted slope of that RSS
    memory_slope_high_mb_h: float | None = None  # the upper end of the slope's interval
    cpu_cores_at_capacity: float | None = None
    python_models: tuple[str, ...] | None = None
    gpus_needed: dict[str, int] | None = None  # model with KIND_GPU instances -> GPUs its groups reference
    exported_metrics: frozenset[str] | None = None
    server_version: str | None = None  # GET /v2: which readiness sees a dead python stub
    replica_capacity: dict[str, float] | None = None  # model -> PERF-2's capacity within SLO (one server = one pod)
    required_at_peak: dict[str, float] | None = None  # model -> OPS-2's declared peak with headroom
    inside_limits: str | None = None  # the limits the server ran inside (container launcher), else None: a host's
    missing: dict[str, str] = field(default_factory=dict)

    def why_missing(self, name: str) -> str:
        return self.missing.get(name, f"not measured in this run ({name})")


@dataclass(frozen=True)
class ContainerJudgement:
    """One rule on one container."""

    rule: str
    verdict: str
    message: str  # the comparison in one sentence (or, INCOMPLETE, what is missing)
    file: str  # "FILE document N": the file and the document within it
    field: str  # the manifest field judged, from the document's root
    manifest_value: Any = None
    measured: float | int | str | None = None
    measured_label: str | None = None
    threshold: ThresholdValue | None = None
    fix: str | None = None

    @property
    def where(self) -> str:
        return f"{self.file}: {self.field}"


def judgement(rule: str, passed: bool | str | None, container: TritonContainer, field_path: str, message: str,
              **details: Any) -> ContainerJudgement:
    """A judgement on `container`'s field (`field_path` below the container, `pod:` below the pod
    spec, `/` from the document's root); passed None is INCOMPLETE, a string is the verdict itself."""
    verdict = passed if isinstance(passed, str) else INCOMPLETE if passed is None else PASS if passed else FAIL
    why_absent = _lookup(container.absent, field_path)
    if why_absent is not None:
        shown, why = why_absent if isinstance(why_absent, tuple) else (
            field_path.removeprefix("/").removeprefix("pod:"), why_absent)
        verdict, message = NOT_APPLICABLE, f"{container.source} has no equivalent of {shown}: {why}"
        details = {}
    if verdict == PASS:
        details.pop("fix", None)
    document = container.document
    return ContainerJudgement(rule, verdict, message, f"{document.path} document {document.index}",
                     full_field(container, field_path), **details)


def worded(container: TritonContainer, key: str, kubernetes: str, **values: Any) -> str:
    """The source's wording of `key` ("rule" or "rule:case"; container.words, a template filled with
    `values`), else the Kubernetes wording as it is."""
    template = container.words.get(key)
    return kubernetes if template is None else template.format(**values)


def _key(table: dict[str, Any], field_path: str) -> str | None:
    """The longest key of `table` that is `field_path` or a field above it."""
    keys = [k for k in table if field_path == k or field_path.startswith((k + ".", k + "["))]
    return max(keys, key=len) if keys else None


def _lookup(table: dict[str, Any], field_path: str) -> Any:
    """The entry of `table` for `field_path` or the nearest field above it."""
    key = _key(table, field_path)
    return table[key] if key is not None else None


def full_field(container: TritonContainer, field_path: str) -> str:
    """The field from the document's root: the source's own field where the container was
    normalized from another shape (`container.fields`), else below the pod or container."""
    key = _key(container.fields, field_path)
    if key is not None:
        return container.fields[key] + field_path[len(key):]
    if field_path.startswith("/"):
        return field_path[1:]
    if field_path.startswith("pod:"):
        pod = container.field_prefix.rsplit(".containers[", 1)[0]
        return f"{pod}.{field_path[4:]}"
    return f"{container.field_prefix}.{field_path}" if field_path else container.field_prefix


def dig(node: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


_MEMORY_UNITS = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
                 "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60, "m": 1e-3}


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity (4Gi, 512M, 500m, 2) as a number of bytes or cores; None if absent."""
    if value is None:
        return None
    match = re.fullmatch(r"([0-9.]+(?:[eE][-+]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[kMGTPEm]?)", str(value).strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    return float(match.group(1)) * _MEMORY_UNITS[match.group(2)]


def flag_value(args: list[str], flag: str) -> str | None:
    """The value of `--flag=V` or `--flag V` in a tritonserver command line (the last one given)."""
    found = None
    for number, word in enumerate(args):
        if word.startswith(flag + "="):
            found = word.split("=", 1)[1]
        elif word == flag and number + 1 < len(args):
            found = args[number + 1]
    return found


def gib(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"
