"""What a failed request means: error reasons (as the load engine folds them, see senders.py)
sorted into kinds, so that a check can tell a dead model instance from ordinary refusals.

- `dead_instance`: "Stub process '<instance>' is not healthy." The python backend's stub of that
  instance has exited; Triton 2.51 never restarts it and keeps the ready endpoints at 200, so one
  such error fails a check whatever the success ratio (docs/health.md).
- `timeout`: no answer within the request timeout (the transport's deadline, or the engine's own
  accounting of requests still outstanding at a window's end).
- `unavailable`: the server refused or was unreachable (UNAVAILABLE, connection refused/reset).
- `not_found`: the model (version) is not loaded (NOT_FOUND, "has no available versions").
- `overloaded`: the server shed load (RESOURCE_EXHAUSTED, HTTP 429/503, queue full).
- `model_error`: the model answered with an error of its own (INTERNAL and the rest).
- `client`: the load engine itself failed to send (a transport bug, a callback).

The fault experiments call `classify` / `dead_instances` on their traffic's errors the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# What Triton answers for a request on a python backend instance whose stub process died.
UNHEALTHY_STUB = re.compile(r"Stub process '(?P<instance>[^']+)' is not healthy")

DEAD_INSTANCE = "dead_instance"
TIMEOUT = "timeout"
UNAVAILABLE = "unavailable"
NOT_FOUND = "not_found"
OVERLOADED = "overloaded"
MODEL_ERROR = "model_error"
CLIENT = "client"

FAILURE_KINDS = (DEAD_INSTANCE, TIMEOUT, UNAVAILABLE, NOT_FOUND, OVERLOADED, MODEL_ERROR, CLIENT)

TIMEOUT_PREFIX = "timeout"  # the engine's own reason for a request outstanding past the request timeout

_TIMEOUT = re.compile(r"^(timeout\b|DEADLINE_EXCEEDED\b|HTTP 504\b)|deadline exceeded|timed out", re.IGNORECASE)
_UNAVAILABLE = re.compile(r"^(UNAVAILABLE\b|CANCELLED\b|ClientConnectorError|ServerDisconnectedError|"
                          r"ClientOSError)|connection refused|connection reset|failed to connect|socket closed",
                          re.IGNORECASE)
_NOT_FOUND = re.compile(r"^NOT_FOUND\b|^HTTP 404\b|has no available versions|unknown model", re.IGNORECASE)
_OVERLOADED = re.compile(r"^(RESOURCE_EXHAUSTED\b|HTTP 429\b|HTTP 503\b)|queue is full|exceeds the maximum queue size",
                         re.IGNORECASE)
_CLIENT = re.compile(r"^(client error:|on_window callback raised)")
# A stub that exited, as the server's log says it (python backend, 2.51): the instance, then why.
_LOG_STUB_EXIT = re.compile(r"Stub process '(?P<instance>[^']+)' is not healthy|"
                            r"(?:stub|Stub) process (?:for model instance |)'?(?P<instance2>[\w.-]+_\d+_\d+)'?"
                            r"[^\n]*?(?:exited|died|terminated|crashed|killed)", re.IGNORECASE)


def classify(reason: str) -> str:
    """The kind of one error reason (one of KINDS)."""
    text = reason or ""
    if UNHEALTHY_STUB.search(text):
        return DEAD_INSTANCE
    if _CLIENT.search(text):
        return CLIENT
    if _TIMEOUT.search(text):
        return TIMEOUT
    if _NOT_FOUND.search(text):
        return NOT_FOUND
    if _OVERLOADED.search(text):
        return OVERLOADED
    if _UNAVAILABLE.search(text):
        return UNAVAILABLE
    return MODEL_ERROR


def dead_instance(reason: str) -> str | None:
    """The instance named by a dead-instance error ("Stub process 'm_0_0' is not healthy."), else None."""
    match = UNHEALTHY_STUB.search(reason or "")
    return match.group("instance") if match else None


def dead_instances(errors: Mapping[str, int]) -> dict[str, int]:
    """{instance: failed requests} for every dead-instance reason among `errors` ({reason: count})."""
    found: dict[str, int] = {}
    for reason, count in errors.items():
        instance = dead_instance(reason)
        if instance:
            found[instance] = found.get(instance, 0) + int(count)
    return found


def stub_exits_in_log(text: str) -> list[tuple[str, str]]:
    """[(instance, log line)] for each line of a server log saying a python stub died, first
    occurrence of each instance."""
    seen: dict[str, str] = {}
    for line in (text or "").splitlines():
        match = _LOG_STUB_EXIT.search(line)
        if not match:
            continue
        instance = match.group("instance") or match.group("instance2")
        if instance and instance not in seen:
            seen[instance] = line.strip()[:300]
    return list(seen.items())


@dataclass
class ErrorSummary:
    """Errors of a span of load sorted by kind: {kind: {reason: count}} plus the dead instances."""

    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    dead: dict[str, int] = field(default_factory=dict)  # instance -> failed requests

    def count(self, kind: str) -> int:
        return sum(self.by_kind.get(kind, {}).values())

    @property
    def total(self) -> int:
        return sum(sum(r.values()) for r in self.by_kind.values())

    @property
    def instance_died(self) -> bool:
        return bool(self.dead)

    def to_dict(self) -> dict:
        return {"by_kind": self.by_kind, "dead_instances": self.dead}


def summarize_errors(errors: Mapping[str, int] | Iterable[tuple[str, int]]) -> ErrorSummary:
    """Sort `errors` ({reason: count}) by kind and collect the dead instances."""
    items = errors.items() if isinstance(errors, Mapping) else errors
    summary = ErrorSummary()
    for reason, count in items:
        kind = classify(reason)
        summary.by_kind.setdefault(kind, {})
        summary.by_kind[kind][reason] = summary.by_kind[kind].get(reason, 0) + int(count)
        instance = dead_instance(reason)
        if instance:
            summary.dead[instance] = summary.dead.get(instance, 0) + int(count)
    return summary
