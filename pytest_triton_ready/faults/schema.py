"""How long and how hard each fault experiment runs: the YAML section `faults:`, declared once
(`FaultsSection`); `FaultPlan` adds the engine's fixed tuning to it.

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

from dataclasses import dataclass
from typing import Any, Literal

from ..yamlschema import SchemaError, Section, setting, validate


class FaultsSection(Section):
    """`faults:` (PERF-4): the fault experiments' model, traffic and timings."""

    model: str | None = setting(None, "the model the experiments break (default: the first READY stateless model "
                                      "in scope, python backend and most instances first)")
    rate_per_s: float = setting(40.0, "open-loop traffic during every experiment", unit="infer/s", gt=0)
    steady_s: float = setting(1.5, "traffic before the fault: the steady state to compare with", unit="s", gt=0)
    observe_s: float = setting(1.5, "after the fault, before any recovery: what clients see", unit="s", gt=0)
    settle_s: float = setting(1.5, "after recovery: traffic must be back to normal", unit="s", gt=0)
    recovery_timeout_s: float = setting(60.0, "longest wait for a server or instance to come back", unit="s", gt=0)
    probe_span_s: float = setting(1.5, "one probe of every instance: concurrent requests for this long", unit="s", gt=0)
    protocol: Literal["grpc", "http"] = setting("grpc", "the experiments' traffic protocol")


def _default(name: str) -> Any:
    return FaultsSection.model_fields[name].default


@dataclass(frozen=True)
class FaultPlan:
    """The `faults:` section as the injector uses it (defaults from FaultsSection), plus fixed tuning."""

    model: str | None = _default("model")
    rate_per_s: float = _default("rate_per_s")
    steady_s: float = _default("steady_s")
    observe_s: float = _default("observe_s")
    settle_s: float = _default("settle_s")
    recovery_timeout_s: float = _default("recovery_timeout_s")
    probe_span_s: float = _default("probe_span_s")
    protocol: str = _default("protocol")
    # A late request is sent anyway (its latency counts from when it was due): on a busy host the
    # client's own hiccups must not show up as drops in an experiment about the server.
    late_drop_s: float = 1.0
    recovered_hold_s: float = 0.5  # clean bins in a row that count as "recovered"

    @classmethod
    def from_section(cls, section: FaultsSection | dict[str, Any] | None) -> FaultPlan:
        """The plan from the typed section (or a plain dict of it; ValueError naming the key)."""
        if not isinstance(section, FaultsSection):
            try:
                section = validate(FaultsSection, dict(section or {}), "faults settings", prefix=("faults",))
            except SchemaError as exc:
                raise ValueError(str(exc).removeprefix("faults settings: ")) from None
        return cls(**section.model_dump())
