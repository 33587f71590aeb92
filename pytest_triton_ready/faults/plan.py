"""How long and how hard each fault experiment runs: the YAML section `faults:`.

    faults:
      model: scale          # the model the experiments break; default: the first READY stateless
                            # model in scope, python backend and most instances first
      rate_per_s: 40        # open-loop traffic during every experiment
      steady_s: 1.5         # traffic before the fault: the steady state to compare with
      observe_s: 1.5        # after the fault, before any recovery: what clients see
      settle_s: 1.5         # after recovery: traffic must be back to normal
      recovery_timeout_s: 60  # longest wait for a server or instance to come back
      probe_span_s: 1.5     # one probe of every instance: concurrent requests for this long
      protocol: grpc        # grpc | http
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

PLAN_SCHEMA: dict[str, Any] = {
    "model": str,
    "rate_per_s": float,
    "steady_s": float,
    "observe_s": float,
    "settle_s": float,
    "recovery_timeout_s": float,
    "probe_span_s": float,
    "protocol": str,
}


@dataclass(frozen=True)
class FaultPlan:
    model: str | None = None
    rate_per_s: float = 40.0
    steady_s: float = 1.5
    observe_s: float = 1.5
    settle_s: float = 1.5
    recovery_timeout_s: float = 60.0
    probe_span_s: float = 1.5
    protocol: str = "grpc"
    # A late request is sent anyway (its latency counts from when it was due): on a busy host the
    # client's own hiccups must not show up as drops in an experiment about the server.
    late_drop_s: float = 1.0
    recovered_hold_s: float = 0.5  # clean bins in a row that count as "recovered"

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> FaultPlan:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in (section or {}).items() if k in known}
        plan = cls(**values)
        if plan.protocol not in ("grpc", "http"):
            raise ValueError(f"faults.protocol must be grpc or http, got {plan.protocol!r}")
        for name in ("rate_per_s", "steady_s", "observe_s", "settle_s", "recovery_timeout_s", "probe_span_s"):
            if getattr(plan, name) <= 0:
                raise ValueError(f"faults.{name} must be positive, got {getattr(plan, name)}")
        return plan
