"""What a run may do to the server under test (the policy), the load ceiling that holds it to that,
and the run plan that says so before the first check: what is under test, who owns it, and every
action that will change or stress it.

A run against a server it does not own (`--triton-launch=attach`, the default with `--triton-url`)
is safe by default: nothing that changes the server (a load, an unload, a config override, a
fault) and nothing that stresses it beyond a ceiling (saturation, large payloads) runs unless the
YAML section `attach:` (or `--triton-allow`) allows that class of action:

    attach:
      allow: [reload, faults, saturate, large_payloads]   # or --triton-allow=reload,faults
      max_concurrency: 8       # requests in flight, all models together, while saturate is not allowed
      max_rate_per_s: 50       # open-loop requests per second, all models together
      max_payload_mib: 1       # a request body above this is a large payload
      fault_actions: {...}     # how to cause PERF-4's faults in this deployment (fault_declarations.py)

An item that is not allowed is INCOMPLETE, naming the switch (`Policy.refusal`), and can be waived
like any other item (`gate.waivers`). The plan block (`plan_block`) is printed before the first
check; `--triton-plan` prints it and exits 0 without touching the server.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .errors import TritonReadyError
from .fault_declarations import FAULT_ACTIONS_HELP, FAULT_KINDS, DeclaredFault, FaultKind
from .launchers.registry import declared_capabilities
from .yamlschema import Section, setting

if TYPE_CHECKING:
    from .record.recorder import CheckRecorder

ALLOW_CLASSES: dict[str, str] = {
    "reload": "load, unload or reload models with a config override (PERF-4 forced reload, CFG-2 batching "
              "tuning, CFG-1 model GPU memory)",
    "faults": "cause the faults declared in attach.fault_actions (PERF-4: crash, SIGTERM, dead instance, "
              "new version)",
    "saturate": "drive models to saturation, above the load ceiling (PERF-2 sweep, CFG-2, GPU utilization)",
    "large_payloads": "send request bodies above attach.max_payload_mib (SEC-3 oversize payload)",
}
AllowClass = Literal["reload", "faults", "saturate", "large_payloads"]


class AttachSection(Section):
    """`attach:`: what a run may do to a server it does not own (safe by default)."""

    allow: list[AllowClass] = setting(list, "classes of action allowed on an attached server: reload, faults, "
                                            "saturate, large_payloads (also --triton-allow)")
    max_concurrency: int = setting(8, "load ceiling while saturate is not allowed: requests in flight, all models "
                                      "together", unit="requests", ge=1)
    max_rate_per_s: float = setting(50.0, "load ceiling while saturate is not allowed: open-loop requests per "
                                          "second, all models together", unit="requests/s", gt=0)
    max_payload_mib: float = setting(1.0, "a request body above this is a large payload", unit="MiB", gt=0)
    exit_timeout_s: float = setting(30.0, "the attached server's --exit-timeout-secs (SIGTERM experiment)",
                                    unit="s", gt=0)
    fault_actions: dict[FaultKind, DeclaredFault] = setting(dict, FAULT_ACTIONS_HELP)


def parse_allow(text: str | Iterable[str]) -> list[str]:
    """`--triton-allow=reload,faults` (or the YAML list) as a list; ValueError naming a bad name."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if str(n).strip()]
    unknown = [n for n in names if n not in ALLOW_CLASSES]
    if unknown:
        raise ValueError(f"unknown action class {', '.join(map(repr, unknown))} (known: {', '.join(ALLOW_CLASSES)})")
    return names


class NotAllowed(TritonReadyError):
    """An action the policy refuses; a check turns it into INCOMPLETE naming the switch."""


@dataclass(frozen=True)
class Policy:
    """What this run may do to the server: what its launcher's capabilities grant (`may`:
    everything when the run owns the process), and on top what `attach.allow` says."""

    attached: bool  # the run does not own the server's process
    granted: frozenset[str]  # the launcher's capabilities.may
    url: str
    allowed: frozenset[str]
    max_concurrency: int
    max_rate_per_s: float
    max_payload_mib: float
    exit_timeout_s: float
    fault_actions: dict[str, DeclaredFault]

    @classmethod
    def from_settings(cls, settings: Any) -> Policy:
        section: AttachSection = settings.section_model("attach")
        allowed = getattr(settings, "triton_allow", None)
        capabilities = declared_capabilities(settings)
        return cls(not capabilities.owns_process, capabilities.may, settings.triton_url or "the launched server",
                   frozenset(section.allow if allowed is None else allowed), section.max_concurrency,
                   section.max_rate_per_s, section.max_payload_mib, section.exit_timeout_s, dict(section.fault_actions))

    def allows(self, kind: str) -> bool:
        return kind in self.granted or kind in self.allowed

    def refusal(self, kind: str, what: str) -> str | None:
        """None when `kind` is allowed; else the INCOMPLETE reason naming the switch."""
        if kind not in ALLOW_CLASSES:
            raise ValueError(f"unknown action class {kind!r}")
        if self.allows(kind):
            return None
        return (f"not run on the attached server {self.url}: {what}; allow it with `attach: {{allow: [{kind}]}}` "
                f"in the YAML or --triton-allow={kind}")

    @property
    def ceiling_applies(self) -> bool:
        return not self.allows("saturate")

    def ceiling_refusal(self, concurrency: float | None = None, rate: float | None = None) -> str | None:
        """None when the load is under the ceiling (or no ceiling applies); else why not."""
        if not self.ceiling_applies:
            return None
        if concurrency is not None and concurrency > self.max_concurrency:
            return (f"not run on the attached server {self.url}: {concurrency:g} requests in flight is above the "
                    f"load ceiling of {self.max_concurrency} (attach.max_concurrency); raise the ceiling, or allow "
                    "saturation with `attach: {allow: [saturate]}` or --triton-allow=saturate")
        if rate is not None and rate > self.max_rate_per_s:
            return (f"not run on the attached server {self.url}: {rate:g} requests/s is above the load ceiling of "
                    f"{self.max_rate_per_s:g} requests/s (attach.max_rate_per_s); raise the ceiling, or allow "
                    "saturation with `attach: {allow: [saturate]}` or --triton-allow=saturate")
        return None

    def large_payload(self, size_bytes: float) -> bool:
        return size_bytes > self.max_payload_mib * 2**20

    def declared(self, kind: str) -> DeclaredFault | None:
        return self.fault_actions.get(kind) if self.attached else None


def policy(settings: Any) -> Policy:
    return Policy.from_settings(settings)


def require_allowed(check: CheckRecorder, settings: Any, kind: str, what: str) -> None:
    """The one-line gate at the top of a check: INCOMPLETE naming the switch when `kind` is not
    allowed on this server; nothing when it is (or when the run launched the server)."""
    reason = policy(settings).refusal(kind, what)
    if reason:
        check.incomplete(reason)


# -- the load ceiling ----------------------------------------------------------------------------
def _total(models: Any, per_model: float | None) -> float | None:
    if isinstance(models, dict):
        return float(sum(models.values()))
    if per_model is None:
        return None
    count = len(models) if isinstance(models, (list, tuple)) else 1
    return float(per_model) * count


class CeilingGuard:
    """The load engine with the attach ceiling in front: traffic above it is refused before it
    starts (the check becomes INCOMPLETE naming the switch). Everything else is the engine's."""

    def __init__(self, engine: Any, policy: Policy) -> None:
        self._engine = engine
        self.policy = policy

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def open_loop(self, models: Any, rate: float | None = None, *args: Any, **kwargs: Any) -> Any:
        guard_traffic(self.policy, rate=_total(models, rate))
        return self._engine.open_loop(models, rate, *args, **kwargs)

    def closed_loop(self, models: Any, concurrency: int | None = None, *args: Any, **kwargs: Any) -> Any:
        guard_traffic(self.policy, concurrency=_total(models, concurrency))
        return self._engine.closed_loop(models, concurrency, *args, **kwargs)

    def measure(self, model: str, *, concurrency: int | None = None, rate: float | None = None, **kwargs: Any) -> Any:
        guard_traffic(self.policy, concurrency=concurrency, rate=rate)
        return self._engine.measure(model, concurrency=concurrency, rate=rate, **kwargs)


def guard_traffic(rules: Policy, concurrency: float | None = None, rate: float | None = None) -> None:
    """The one ceiling guard every load a check drives passes, unary (CeilingGuard) and streamed
    (load/streaming/run.StreamingRun.load) alike: traffic above the attach ceiling does not start,
    the check ends INCOMPLETE naming the switch; nothing where no ceiling applies."""
    reason = rules.ceiling_refusal(concurrency=concurrency, rate=rate)
    if reason:
        import pytest

        pytest.skip(f"incomplete: {reason}")


def guard_load(engine: Any, settings: Any) -> Any:
    """`engine` itself when no ceiling applies, else the engine behind a CeilingGuard."""
    rules = policy(settings)
    return CeilingGuard(engine, rules) if rules.ceiling_applies else engine


# -- the plan block ------------------------------------------------------------------------------
HOW_BUILT_IN = {
    "server_crash": "SIGKILL of the server's process group by the {launcher} launcher, then started again",
    "sigterm": "SIGTERM to the server process by the {launcher} launcher, then started again",
    "instance_kill": "SIGKILL of one python backend stub, then unload + load of the model",
    "new_version": "version N+1 copied into a scratch copy of the model, served by a second server (the "
                   "repository under test is not touched)",
}
FAULT_CHECK = {"server_crash": "crash + restart", "sigterm": "SIGTERM", "instance_kill": "dead instance",
               "new_version": "new version"}


def plan_block(settings: Any, check_ids: Iterable[str] | None = None, waived: Iterable[str] = (),
               estimate_lines: Iterable[str] = (), deployment: Any = None) -> str:
    """The run plan as text: the server, its owner, what is allowed, per check in scope what it
    will do to the server, `estimate_lines` (pytest_triton_ready/estimates.py: the time per
    phase) and, for the container launcher, the limits of `deployment` (the Manifest the run
    read). Reads only the settings and that manifest: never contacts the server or a cluster."""
    rules = policy(settings)
    ids = set(check_ids) if check_ids is not None else None
    waived = set(waived)
    launcher = settings.launch
    where = settings.triton_url if rules.attached else f"a tritonserver the run starts ({launcher} launcher)"
    repository = settings.triton_model_repository
    models = ", ".join(settings.triton_models) if settings.triton_models else "every model the server lists"
    lines = ["triton-ready run plan",
             f"  under test: {where}" + (f", models from {repository}" if repository and not rules.attached else ""),
             "  owner: " + ("attached: this run does not own the server; it changes nothing and stays under the "
                            "load ceiling unless attach.allow says so" if rules.attached else
                            "launched: this run owns the server and may reload, stress, kill and restart it"),
             f"  models in scope: {models}"]
    if rules.attached:
        allowed = ", ".join(sorted(rules.allowed)) or "nothing"
        lines.append(f"  allowed (attach.allow / --triton-allow): {allowed}; not allowed: "
                     + (", ".join(k for k in ALLOW_CLASSES if k not in rules.allowed) or "-"))
        lines.append("  load ceiling: " + (
            f"{rules.max_concurrency} requests in flight, {rules.max_rate_per_s:g} requests/s, request bodies up to "
            f"{rules.max_payload_mib:g} MiB (attach.max_concurrency, attach.max_rate_per_s, attach.max_payload_mib)"
            if rules.ceiling_applies else "none: saturate is allowed"))
    lines.append("  actions that change or stress the server:")
    for check_id, text in _actions(settings, rules):
        if ids is not None and check_id not in ids:
            continue
        mark = " (waived)" if check_id in waived else ""
        lines.append(f"    {check_id + mark:8} {text}")
    lines.extend(estimate_lines)
    if settings.triton_deployment is not None:
        lines.append(f"  deployment: {settings.triton_deployment} (Kubernetes {settings.triton_kubernetes_version} "
                     "schemas), its probes, grace period and limits judged against this run's measurements "
                     "(docs/deployment.md)")
        lines.extend(_inside_limits(settings, deployment))
    lines.append("  everything else reads only: health, repository index, configs, statistics, metrics, one "
                 "inference per model, malformed requests that a server refuses")
    return "\n".join(lines)


def _inside_limits(settings: Any, deployment: Any) -> list[str]:
    """The container launcher's run inside the deployment's limits, and what it could not carry over."""
    if settings.launch != "container" or deployment is None:
        return []
    from .deployment.pod_limits import pod_limits

    try:
        pod = pod_limits(deployment)
    except ValueError as exc:
        return [f"  container: not inside the deployment's limits: {exc}"]
    return [f"  container inside the deployment's limits: {pod.describe()}"] + [
        f"    not carried over: {line}" for line in pod.left_out]


def _threshold(settings: Any, name: str) -> float:
    return settings.threshold(name).value


def _actions(settings: Any, rules: Policy) -> list[tuple[str, str]]:
    def gate(kind: str) -> str:
        return "" if rules.allows(kind) else f" -> NOT RUN, INCOMPLETE (needs {kind})"

    out: list[tuple[str, str]] = []
    if settings.section_model("lint").measures_model_memory:
        out.append(("CFG-1", "unload + load of each model with GPU instances, to measure its GPU memory"
                    + ("" if rules.allows("reload") else " -> not measured (needs reload)")))
    cap = int(_threshold(settings, "curve_max_concurrency"))
    top = f"up to {cap}" if cap else "up to 2 x max_batch_size x instances"
    out.append(("CFG-2", f"closed loop at saturation ({top} requests in flight per batched model){gate('saturate')}"))
    if settings.triton_tune_batching:
        out.append(("CFG-2", "reloads each batched model with a few max_queue_delay_microseconds values, then its "
                             f"own config (--triton-tune-batching){gate('reload')}"))
    perf1 = int(_threshold(settings, "perf_target_concurrency"))
    rates = [s.min_throughput for s in [settings.slo_for(m) for m in settings.triton_models or ["default"]]
             if s.min_throughput]
    perf1_text = f"closed loop at {perf1} requests in flight per model"
    if rates:
        perf1_text += f"; Poisson at the min_throughput SLO (up to {max(rates):g} requests/s)"
    refused = rules.ceiling_refusal(concurrency=perf1, rate=max(rates) if rates else None)
    out.append(("PERF-1", perf1_text + (" -> NOT RUN above the ceiling, INCOMPLETE" if refused else "")))
    out.append(("PERF-1", f"GPU utilization at saturation ({top} per model; only with GPUs){gate('saturate')}"))
    out.append(("PERF-2", f"concurrency sweep {top} per model, until latency passes the budget{gate('saturate')}"))
    if settings.triton_soak:
        soak = settings.section_model("soak")
        pinned = f"; pinned: {dict(soak.rates)}" if soak.rates else ""
        out.append(("PERF-3", f"soak of {settings.triton_soak:g} s, open loop per model at "
                              f"{_threshold(settings, 'soak_rate_fraction'):g} x PERF-2's capacity within SLO, else "
                              f"{soak.rate or _threshold(settings, 'soak_default_rate_infer_s'):g} requests/s{pinned}"))
    out.extend(_streaming_actions(settings, rules, gate))
    faults = settings.section_model("faults")
    target = faults.model or "the first READY stateless model, else a decoupled one under streams (chosen at run time)"
    traffic = f"under {faults.rate_per_s:g} requests/s ({faults.protocol})"
    out.append(("PERF-4", f"forced reload of {target} with a config override, then its own config back, "
                          f"{traffic}{gate('reload')}"))
    for kind in ("new_version", "instance_kill", "server_crash", "sigterm"):
        out.append(("PERF-4", f"{FAULT_CHECK[kind]}: {_fault_how(kind, rules, launcher=settings.launch)}"))
    oversize = _threshold(settings, "malformed_oversize_payload_mib")
    large = rules.large_payload(oversize * 2**20)
    out.append(("SEC-3", f"one oversize request of {oversize:g} MiB to every model (a model with a -1 dimension "
                         "may execute it)" + (gate("large_payloads") if large else "")))
    return out


def _streaming_actions(settings: Any, rules: Policy, gate: Any) -> list[tuple[str, str]]:
    """What checks/test_streaming.py does to each READY decoupled model, under the same guards as unary."""
    streams = int(_threshold(settings, "streaming_concurrency"))
    above = " -> NOT RUN above the ceiling, INCOMPLETE" if rules.ceiling_refusal(concurrency=streams) else ""
    top = int(_threshold(settings, "streaming_curve_max_concurrency"))
    out = [("PERF-1", f"streams: closed loop at {streams} streams per decoupled model{above}"),
           ("PERF-2", f"streams: sweep 1, 2, 4 ... {top} streams per decoupled model{gate('saturate')}")]
    soak_s = _threshold(settings, "streaming_soak_s")
    if soak_s > 0:
        out.append(("PERF-3", f"streams: soak of {soak_s:g} s at {streams} streams per decoupled model{above}"))
    out.append(("PERF-4", "streams: 2 x instances streams per decoupled model, cancelled mid-generation"
                + (" (more than the ceiling: NOT RUN, INCOMPLETE)" if rules.ceiling_applies else "")))
    return out


def _fault_how(kind: str, rules: Policy, launcher: str) -> str:
    if not rules.attached:
        return HOW_BUILT_IN[kind].format(launcher=launcher)
    declared = rules.declared(kind)
    if declared is None:
        return f"NOT RUN, INCOMPLETE: no attach.fault_actions.{kind} declared"
    how = f"`{declared.action.shown()}` (timeout {declared.action.timeout_s:g} s)"
    if declared.restore is not None:
        how += f", restored by `{declared.restore.shown()}`"
    if kind == "instance_kill":
        how += ", then unload + load of the model"
    if kind == "new_version":
        how += ", then a load of the model"
    return how + ("" if rules.allows("faults") else " -> NOT RUN, INCOMPLETE (needs faults)")


__all__ = ["ALLOW_CLASSES", "AttachSection", "CeilingGuard", "FAULT_KINDS", "NotAllowed", "Policy", "guard_load",
           "guard_traffic", "parse_allow", "plan_block", "policy", "require_allowed"]
