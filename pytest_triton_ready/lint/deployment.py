"""CFG-1 "model configs lint clean" on a deployment: find its configs, build what the rules know
(the settings, the whole repository, the GPUs and each GPU model's measured memory), run the lint
and record its findings (checks/test_config.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..policy import policy
from ..server.models import ready_names
from .context import disabled_rules, lint_context
from .engine import LintContext, UnknownRule, lint
from .model_memory import NotMeasured, measure_model_memory
from .model_rules import has_gpu_instances
from .sources import DeploymentConfigs, deployment_configs, repository_models

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder
    from ..server.under_test import ServerUnderTest

RELOADS = "measuring a model's GPU memory unloads and reloads it"
FIX = ("Fix each config.pbtxt named above; docs/config-rules.md explains every rule id, and "
       "`lint: {disable: [id]}` in the YAML turns off a rule that does not fit the deployment.")


def memory_unmeasured_reason(model: str, *, enabled: bool, refusal: str | None, served: set[str]) -> str | None:
    """Why a GPU model's memory is not measured (None: measure it). Measuring unloads and reloads
    the model, so it needs `lint.measure_model_memory` and a run allowed to reload; and the model
    must be loaded."""
    if refusal:
        return refusal
    if not enabled:
        return f"{RELOADS}: lint.measure_model_memory is false"
    if model not in served:
        return "the model is not loaded on the server"
    return None


def _measure_model_memory(check: CheckRecorder, target: ServerUnderTest, settings: Any, gpu: Any, found: DeploymentConfigs,
                          context: LintContext) -> None:
    """Each GPU model's memory (unloaded vs loaded) into the context, or why it was not measured."""
    readings = context.gpus or []
    if not readings:
        return  # the rule says why it could not look
    refusal = policy(settings).refusal("reload", RELOADS)
    enabled = bool(settings.section_model("lint").measures_model_memory)
    served = ready_names(target.client)
    for source in (s for s in found.sources if has_gpu_instances(s.config, [g.index for g in readings])):
        reason = memory_unmeasured_reason(source.name, enabled=enabled, refusal=refusal, served=served)
        if reason is None:
            try:
                memory = measure_model_memory(target.client, gpu, source.name)
            except NotMeasured as exc:
                reason = f"its GPU memory was not measured: {exc}"
        if reason is not None:
            context.model_memory_unmeasured[source.name] = reason
            continue
        context.model_memory_bytes[source.name] = memory
        check.measure("model GPU memory (unloaded vs loaded)", round(sum(memory.values()) / 1e9, 3), "GB",
                      model=source.name)


def deployment_context(check: CheckRecorder, target: ServerUnderTest, settings: Any, gpu: Any, found: DeploymentConfigs) -> LintContext:
    """What the rules know about this deployment beyond each config."""
    context = lint_context(settings, [s.name for s in found.sources])
    context.repository = repository_models(target, found)
    context.repository_where = (found.where if found.from_files
                                else f"the repository index of {target.endpoints.http_url}")
    context.gpus = gpu.read() or None
    context.gpus_unknown_reason = f"no GPU reading ({gpu.unavailable_reason})"
    _measure_model_memory(check, target, settings, gpu, found, context)
    return context


def lint_deployment(check: CheckRecorder, target: ServerUnderTest, settings: Any, gpu: Any) -> None:
    """Every config parses against ModelConfig and breaks no lint rule of severity error; a syntax
    error is an error finding; warnings are recorded without failing; no config at all is INCOMPLETE."""
    found = deployment_configs(target)
    mark = check.mark()
    check.evidence("configs linted", f"{found.where}: " + (", ".join(s.origin for s in found.sources) or "none"))
    for error in found.errors:
        check.finding(f"{error}", rule="config-syntax", value=error.origin)
    if not found.sources and not found.errors:
        check.incomplete(f"no model config found in {found.where}")
    context = deployment_context(check, target, settings, gpu, found)
    try:
        findings = lint(found.sources, context, disabled_rules(settings))
    except UnknownRule as exc:
        check.finding(f"{exc} (from {settings.config_file})", rule="lint.disable")
        return
    for item in findings:
        check.finding(item.message, severity=item.severity, rule=item.rule, model=item.model, value=item.value)
    check.measure("models linted", len(found.sources), "models")
    check.judged_since(mark, "config-lint", measured=f"{len(found.sources)} model configs from {found.where}")
    for severity in ("error", "warning"):
        check.measure(f"lint {severity}s", sum(f.severity == severity for f in findings), "findings")
    if any(f.severity == "error" for f in findings) or found.errors:
        check.recommend(FIX)
