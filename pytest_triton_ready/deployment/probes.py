"""The probes: liveness on /v2/health/live (never on ready, which is not ready while a model
loads), readiness on /v2/health/ready or a model's ready endpoint, and a startup budget that
covers the start-to-ready time this run measured, with a margin."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ..thresholds import ThresholdValue
from .judgement import ContainerJudgement, Measured, dig, judgement, worded
from .reading import TritonContainer

LIVE, READY = "/v2/health/live", "/v2/health/ready"
# Kubernetes' defaults for a probe that leaves them out
PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3}


def _path(probe: dict | None) -> str | None:
    return dig(probe, "httpGet", "path")


def liveness_path(container: TritonContainer) -> ContainerJudgement:
    """Liveness asks /v2/health/live: a liveness probe on ready restarts a server that is loading."""
    probe = container.container.get("livenessProbe")
    path = _path(probe)
    if probe is None:
        return judgement("liveness-path", False, container, "livenessProbe",
                         "no livenessProbe: a hung server is never restarted",
                         fix=f"livenessProbe: {{httpGet: {{path: {LIVE}, port: http}}}}")
    message = f"livenessProbe asks {path or 'no HTTP path'}, the rule is {LIVE}"
    fix = (f"livenessProbe.httpGet.path: {LIVE}; {READY} is not ready while a model loads (explicit mode) or a "
           "model failed, and a liveness probe on it restarts the pod in a loop") if path == READY else \
        f"livenessProbe.httpGet.path: {LIVE}"
    return judgement("liveness-path", path == LIVE, container, "livenessProbe.httpGet.path", message,
                     manifest_value=path, fix=fix)


# Triton releases whose ready endpoints reflect a dead python backend stub (server issues #7230, #8604)
MODEL_READY_SEES_DEAD_STUB, SERVER_READY_SEES_DEAD_STUB = (2, 64), (2, 68)


def _version(text: str | None) -> tuple[int, ...] | None:
    parts = re.findall(r"\d+", text or "")
    return tuple(int(p) for p in parts[:2]) if len(parts) >= 2 else None


def blind_to_dead_stubs(path: str | None, measured: Measured) -> str:
    """The sentence that says a readiness probe cannot see a dead python stub on this server's
    release, or '' where it can (or nothing says)."""
    version = _version(measured.server_version)
    if version is None or not measured.python_models or not path:
        return ""
    sees = SERVER_READY_SEES_DEAD_STUB if path == READY else MODEL_READY_SEES_DEAD_STUB
    if version >= sees:
        return ""
    return (f"; on Triton {measured.server_version} a dead python backend stub leaves {path} at 200 (model "
            "readiness reflects it from 2.64, server readiness from 2.68): this probe cannot see a dead instance of "
            f"{', '.join(measured.python_models)}, only real inferences can (PERF-4's dead-instance experiment)")


def readiness_probe(container: TritonContainer, measured: Measured) -> ContainerJudgement:
    """Readiness asks /v2/health/ready (or /v2/models/M/ready): traffic goes only to a server
    whose models are ready. Its detection time (periodSeconds x failureThreshold) is stated, and
    where this server's release keeps the endpoint at 200 with a dead python stub, that too."""
    probe = container.container.get("readinessProbe")
    path = _path(probe)
    good = path == READY or bool(path and path.startswith("/v2/models/") and path.endswith("/ready"))
    if probe is None:
        message = worded(container, "readiness-path:none",
                         "no readinessProbe: traffic reaches the pod before its models are loaded")
    else:
        detection = (probe.get("periodSeconds", PROBE_DEFAULTS["periodSeconds"])
                     * probe.get("failureThreshold", PROBE_DEFAULTS["failureThreshold"]))
        shown, stubs = path or "no HTTP path", blind_to_dead_stubs(path, measured)
        message = worded(container, "readiness-path",
                         f"readinessProbe asks {shown}, the rule is {READY} or /v2/models/M/ready; it takes the pod "
                         f"out of the endpoints {detection:g} s after it stops being ready{stubs}",
                         path=shown, detection=detection, stubs=stubs)
    return judgement("readiness-path", good, container, "readinessProbe.httpGet.path", message,
                     manifest_value=path, fix=worded(container, "readiness-path:fix", f"readinessProbe.httpGet.path: {READY}"))


def probe_budget_s(probe: dict) -> float:
    """How long a probe lets a container start: initialDelaySeconds + failureThreshold x periodSeconds."""
    values = {key: probe.get(key, default) for key, default in PROBE_DEFAULTS.items()}
    return values["initialDelaySeconds"] + values["failureThreshold"] * values["periodSeconds"]


def startup_budget(container: TritonContainer, measured: Measured,
                   limits: Mapping[str, ThresholdValue]) -> ContainerJudgement:
    """The startup budget (startupProbe, else the liveness probe) covers the measured start-to-ready
    time x (1 + deployment_startup_margin)."""
    margin = limits["deployment_startup_margin"]
    startup, liveness = container.container.get("startupProbe"), container.container.get("livenessProbe")
    probe, name = (startup, "startupProbe") if startup else (liveness, "livenessProbe")
    if probe is None:
        return judgement("startup-budget", False, container, "startupProbe",
                         worded(container, "startup-budget:none",
                                "neither a startupProbe nor a livenessProbe: nothing bounds or protects the start"),
                         threshold=margin, fix=worded(container, "startup-budget:fix-none",
                                                      "startupProbe on /v2/health/ready with failureThreshold x "
                                                      "periodSeconds above the measured start-to-ready time"))
    budget = probe_budget_s(probe)
    initial, retries, period = (probe.get("initialDelaySeconds", 0), probe.get("failureThreshold", 3),
                                probe.get("periodSeconds", 10))
    formula = worded(container, "startup-budget:formula", f"{name}: {initial} + {retries} x {period} = {budget:g} s",
                     initial=initial, retries=retries, period=period, budget=budget)
    if measured.start_to_ready_s is None:
        return judgement("startup-budget", None, container, name, f"{formula}, held against nothing: "
                         f"{measured.why_missing('start_to_ready_s')}", manifest_value=budget, threshold=margin)
    needed = measured.start_to_ready_s * (1 + margin.value)
    return judgement(
        "startup-budget", budget >= needed, container, name,
        f"{formula}; measured start-to-ready {measured.start_to_ready_s:.1f} s x (1 + {margin.value:g}) = "
        f"{needed:.1f} s needed", manifest_value=budget, measured=measured.start_to_ready_s,
        measured_label="start-to-ready time", threshold=margin,
        fix=worded(container, "startup-budget:fix",
                   f"{name}.failureThreshold: {math.ceil((needed - initial) / period)} (with periodSeconds "
                   f"{period}), or a startupProbe if there is none, so the pod is not restarted while its models load",
                   start_period=math.ceil(needed)))


def judge_probes(container: TritonContainer, measured: Measured,
                 limits: Mapping[str, ThresholdValue]) -> list[ContainerJudgement]:
    return [liveness_path(container), readiness_probe(container, measured),
            startup_budget(container, measured, limits)]
