"""Termination: terminationGracePeriodSeconds covers the preStop delay plus the drain this run
measured under traffic, and exceeds preStop plus the server's --exit-timeout-secs (else the kubelet
SIGKILLs a server still draining: exit code 137); requests refused after SIGTERM want a preStop
delay that lets the endpoints drop the pod first."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..thresholds import ThresholdValue
from .judgement import ContainerJudgement, Measured, dig, flag_value, judgement, worded
from .probes import PROBE_DEFAULTS
from .reading import TritonContainer

DEFAULT_GRACE_S = 30  # Kubernetes' terminationGracePeriodSeconds when the pod spec leaves it out
DEFAULT_EXIT_TIMEOUT_S = 30  # tritonserver --exit-timeout-secs


def grace_s(container: TritonContainer) -> tuple[float, bool]:
    """(the pod's grace period, whether the manifest sets it)."""
    value = container.pod_spec.get("terminationGracePeriodSeconds")
    default = container.defaults.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S)
    return (float(value), True) if value is not None else (float(default), False)


def pre_stop_s(container: TritonContainer) -> float:
    """The preStop hook's delay: `sleep: {seconds: N}`, or an exec command that sleeps N; 0 without one."""
    hook = dig(container.container, "lifecycle", "preStop") or {}
    if dig(hook, "sleep", "seconds") is not None:
        return float(hook["sleep"]["seconds"])
    command = " ".join(str(word) for word in dig(hook, "exec", "command") or [])
    found = re.search(r"\bsleep\s+([0-9.]+)", command)
    return float(found.group(1)) if found else 0.0


def exit_timeout_s(container: TritonContainer) -> float:
    value = flag_value(container.args, "--exit-timeout-secs")
    return float(value) if value is not None else float(DEFAULT_EXIT_TIMEOUT_S)


def _grace_text(container: TritonContainer) -> str:
    grace, set_here = grace_s(container)
    owner = container.source + ("'" if container.source.endswith("s") else "'s")
    name = container.defaults.get("grace_source", f"{owner} default")
    field = worded(container, "grace-period:name", "terminationGracePeriodSeconds")
    return f"{field} {grace:g} s" + ("" if set_here else f" ({name})")


def grace_covers_drain(container: TritonContainer, measured: Measured,
                       limits: Mapping[str, ThresholdValue]) -> ContainerJudgement:
    """grace >= preStop + measured drain + deployment_grace_margin_s."""
    margin = limits["deployment_grace_margin_s"]
    grace, _ = grace_s(container)
    stop = pre_stop_s(container)
    if measured.drain_s is None:
        return judgement("grace-period-drain", None, container, "pod:terminationGracePeriodSeconds",
                         f"{_grace_text(container)}, held against nothing: {measured.why_missing('drain_s')}",
                         manifest_value=grace, threshold=margin)
    needed = stop + measured.drain_s + margin.value
    text = _grace_text(container)
    return judgement(
        "grace-period-drain", grace >= needed, container, "pod:terminationGracePeriodSeconds",
        worded(container, "grace-period-drain", f"{text}; preStop {stop:g} s + measured drain {measured.drain_s:.1f} s "
               f"+ margin {margin.value:g} s = {needed:.1f} s needed", grace=text, drain=measured.drain_s,
               margin=margin.value, needed=needed),
        manifest_value=grace, measured=measured.drain_s, measured_label="drain under traffic (SIGTERM until exit)",
        threshold=margin, fix=worded(container, "grace-period-drain:fix",
                                     f"terminationGracePeriodSeconds: {int(needed) + 1}, so the kubelet does not "
                                     "SIGKILL (exit 137) a server still draining", seconds=int(needed) + 1))


def grace_exceeds_exit_timeout(container: TritonContainer) -> ContainerJudgement:
    """grace > preStop + --exit-timeout-secs: the server's own timeout ends first, not the kubelet's."""
    grace, _ = grace_s(container)
    stop, timeout = pre_stop_s(container), exit_timeout_s(container)
    default = "" if flag_value(container.args, "--exit-timeout-secs") is not None else " (Triton default)"
    text = _grace_text(container)
    return judgement(
        "grace-period-exit-timeout", grace > stop + timeout, container, "pod:terminationGracePeriodSeconds",
        worded(container, "grace-period-exit-timeout", f"{text}; preStop {stop:g} s + --exit-timeout-secs "
               f"{timeout:g} s{default} = {stop + timeout:g} s, the rule is more than that", grace=text,
               timeout=timeout, default=default),
        manifest_value=grace, fix=worded(container, "grace-period-exit-timeout:fix",
                                         f"terminationGracePeriodSeconds: {int(stop + timeout) + 5}, or a lower "
                                         "--exit-timeout-secs: a server that uses its whole exit timeout is SIGKILLed "
                                         "(exit code 137) with requests in flight", seconds=int(stop + timeout) + 5))


def pre_stop_delay(container: TritonContainer, measured: Measured) -> ContainerJudgement:
    """No request refused after SIGTERM, or a preStop delay at least the readiness probe's detection
    time (periodSeconds x failureThreshold), so the endpoints drop the pod before the signal."""
    probe = container.container.get("readinessProbe") or {}
    detection = (probe.get("periodSeconds", PROBE_DEFAULTS["periodSeconds"])
                 * probe.get("failureThreshold", PROBE_DEFAULTS["failureThreshold"]))
    stop = pre_stop_s(container)
    if measured.refused_after_sigterm is None:
        return judgement("pre-stop-delay", None, container, "lifecycle.preStop",
                         f"preStop {stop:g} s, held against nothing: {measured.why_missing('refused_after_sigterm')}",
                         manifest_value=stop)
    refused = measured.refused_after_sigterm
    return judgement(
        "pre-stop-delay", refused == 0 or stop >= detection, container, "lifecycle.preStop",
        f"{refused} requests were refused after SIGTERM; preStop {stop:g} s against the readiness probe's "
        f"detection time {detection:g} s", manifest_value=stop, measured=refused,
        measured_label="requests refused after SIGTERM",
        fix=f"lifecycle.preStop: {{sleep: {{seconds: {detection:g}}}}} (Kubernetes 1.30+, or exec `sleep "
            f"{detection:g}`) keeps those requests: the endpoints drop the pod before Triton stops taking them")


def judge_termination(container: TritonContainer, measured: Measured,
                      limits: Mapping[str, ThresholdValue]) -> list[ContainerJudgement]:
    return [grace_covers_drain(container, measured, limits), grace_exceeds_exit_timeout(container),
            pre_stop_delay(container, measured)]
