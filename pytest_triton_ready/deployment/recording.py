"""The deployment's judgements on a check: each rule judged (PASS or FAIL) with the manifest's
file, field and value, the measured number, the named threshold and the fix; a rule that lacked a
measurement makes the check INCOMPLETE naming it (never a pass); without --triton-deployment the
check is NOT APPLICABLE, saying how to give one."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tritonclient.utils import InferenceServerException

from ..errors import TritonReadyError
from ..facts import Facts
from ..server.api_categories import REQUIRED_BY_DEFAULT
from ..server.metrics import MetricsError
from ..thresholds import THRESHOLDS, ThresholdValue
from .judgement import FAIL, INCOMPLETE, NOT_APPLICABLE, PASS, ContainerJudgement, Measured
from .manifest import Manifest
from .measured import measured_from

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder

HOW_TO_GIVE_ONE = ("no deployment given: render the manifests (`helm template RELEASE CHART > rendered.yaml`, or "
                   "`kustomize build`, or `docker compose config > rendered.yaml` for a compose file) and pass "
                   "--triton-deployment=rendered.yaml (or deployment.manifests in the YAML, or "
                   "TRITON_READY_DEPLOYMENT) to judge them against what this run measures")


def deployment_or_not_applicable(check: CheckRecorder, run: Any) -> Manifest:
    """The run's deployment; NOT APPLICABLE, saying how to give one, without it."""
    if run.deployment is None:
        check.not_applicable(HOW_TO_GIVE_ONE)
    return run.deployment


def required_restricted(settings: Any) -> list[str]:
    """The API categories SEC-1 requires restricted (security.restricted_apis, else its default)."""
    return list(settings.section_model("security").restricted_apis or REQUIRED_BY_DEFAULT)


def limits(check: CheckRecorder) -> dict[str, ThresholdValue]:
    """Every deployment threshold as this check sees it."""
    return {name: check.threshold(name) for name in THRESHOLDS if name.startswith("deployment_")}


def run_measured(check: CheckRecorder, triton: Any, facts: Facts) -> Measured:
    """This run's measurements: the facts, the in-scope models' configs and the exported metric names."""
    configs: dict[str, Any] | None = {}
    try:
        for model in triton.models():
            try:
                configs[model] = triton.client.model_config(model)
            except InferenceServerException:  # not loaded: the server serves none of it, nothing to fit
                continue
    except (TritonReadyError, OSError):  # the server stopped answering: the rules that need configs are INCOMPLETE
        configs = None
    try:
        exported, why = frozenset(triton.scrape_metrics().names), None
    except MetricsError as error:  # the autoscaler rule is then INCOMPLETE, naming it
        exported, why = None, str(error)
    try:
        version = triton.client.server_metadata().get("version")
    except (InferenceServerException, TritonReadyError, OSError):
        version = None
    inside = getattr(triton.launcher, "spec", None)
    inside = inside.pod if inside is not None else None  # the container launcher ran it inside the pod's limits
    return measured_from(facts, configs, exported, why, check.threshold("soak_leak_min_duration_s").value, version,
                         inside.describe() if inside is not None else None)


def _sentence(judgement: ContainerJudgement) -> str:
    threshold = judgement.threshold
    named = f" (threshold {threshold.name} = {threshold.value:g} {threshold.unit}, {threshold.source})" \
        if threshold else ""
    return f"{judgement.where}: {judgement.message}{named}"


def record(check: CheckRecorder, judgements: list[ContainerJudgement]) -> None:
    """Record every judgement; INCOMPLETE (naming what is missing) where a rule lacked a measurement
    and none failed; NOT APPLICABLE where no rule applied."""
    missing = []
    for judgement in judgements:
        if judgement.verdict in (PASS, FAIL):
            check.judge(judgement.rule, judgement.verdict == PASS, measured=_sentence(judgement),
                        finding=f"{judgement.rule}: {_sentence(judgement)}")
        else:
            check.finding(f"{judgement.rule} ({judgement.verdict}): {_sentence(judgement)}", severity="info")
        if judgement.verdict == INCOMPLETE:
            missing.append(f"{judgement.rule}: {judgement.message}")
        if judgement.measured is not None:
            check.measure(f"{judgement.rule}: {judgement.measured_label}", judgement.measured)
        if judgement.manifest_value is not None:
            value = judgement.manifest_value
            check.setting(f"{judgement.rule}: {judgement.field}",
                          value if isinstance(value, (int, float, str)) else json.dumps(value), source=judgement.file)
        if judgement.fix and judgement.verdict != NOT_APPLICABLE:
            check.recommend(f"{judgement.where}: {judgement.fix}")
    if missing and not check.failed:
        check.incomplete("; ".join(missing))
    if judgements and all(j.verdict == NOT_APPLICABLE for j in judgements):
        check.not_applicable("; ".join(j.message for j in judgements))


def server_arguments(triton: Any) -> tuple[list[str] | None, str]:
    """The command line of the server this run measured (without its per-run paths and ports), or
    None and why not: an attached server's is not known here."""
    arguments = (getattr(triton.launcher, "launch_identity", None) or {}).get("arguments")
    if arguments is None:
        return None, ("the server was attached (--triton-url): its command line is not known here; launch it "
                      "(--triton-launch=embedded or container) to hold the manifest's flags against it")
    return [str(a) for a in arguments], ""


def latency_budget(settings: Any, models: list[str]) -> tuple[float | None, str]:
    """The smallest p99 budget (ms) of the models in scope and where it comes from: their SLOs, else
    the budget PERF-2's capacity is judged within (capacity_default_p99_ms)."""
    budgets = sorted((settings.slo_for(m).p99_ms, m) for m in models if settings.slo_for(m).p99_ms is not None)
    if budgets:
        budget, model = budgets[0]
        return float(budget), f"{model}'s SLO, the smallest in scope"
    default = settings.threshold("capacity_default_p99_ms")
    return float(default.value), f"no SLO declared: capacity_default_p99_ms ({default.source}), as PERF-2 uses"
