"""Which configs a run checks: the files of the model repository when one is known, else the
live configs the server serves (GET /v2/models/M/config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..server.models import ready_names
from .model_rules import has_gpu_instances
from .modelconfig import ConfigSyntaxError, ModelSource, read_repository, source_from_server


@dataclass
class DeploymentConfigs:
    """The configs found, the ones that could not be read, and where they came from."""

    where: str
    sources: list[ModelSource] = field(default_factory=list)
    errors: list[ConfigSyntaxError] = field(default_factory=list)
    from_files: bool = True


def repository_path(target) -> Path | None:
    """--triton-model-repository, else the repository the run's own launcher serves."""
    configured = target.settings.triton_model_repository
    if configured:
        return Path(configured)
    served = target.launcher.model_repository
    return Path(served) if served else None


def deployment_configs(target) -> DeploymentConfigs:
    """Every config in scope: repository files (all models, or --triton-models), else live ones."""
    repository = repository_path(target)
    if repository is not None:
        if not repository.is_dir():
            found = DeploymentConfigs(f"repository {repository}")
            found.errors.append(ConfigSyntaxError(str(repository), None, None, "not a directory"))
            return found
        sources, errors = read_repository(repository, target.settings.triton_models or ())
        return DeploymentConfigs(f"repository {repository}", sources, errors)
    found = DeploymentConfigs(f"live configs from {target.endpoints.http_url}", from_files=False)
    ready = ready_names(target.client)
    for model in target.models():
        origin = f"{target.endpoints.http_url}/v2/models/{model}/config"
        if model not in ready:
            continue  # CFG-1 "models READY" reports it; an unloaded model has no live config
        try:
            found.sources.append(source_from_server(model, target.client.model_config(model), origin))
        except ConfigSyntaxError as exc:
            found.errors.append(exc)
    return found


def repository_models(target, found: DeploymentConfigs) -> dict[str, ModelSource | None]:
    """Every model of the repository by name, for rules that look across models (ensemble steps):
    from files, each model directory (its source, or None where it has no readable config.pbtxt);
    live, each model the repository index lists (the configs of READY ones)."""
    known: dict[str, ModelSource | None] = {}
    if found.from_files:
        repository = repository_path(target)
        if repository is not None and repository.is_dir():
            sources, _ = read_repository(repository)
            known = {p.name: None for p in repository.iterdir() if p.is_dir() and not p.name.startswith(".")}
            known.update({s.name: s for s in sources})
    else:
        known = {entry["name"]: None for entry in target.client.repository_index()}
        ready = ready_names(target.client)
        for name in ready:
            try:
                known[name] = source_from_server(name, target.client.model_config(name), name)
            except ConfigSyntaxError:
                continue
    known.update({s.name: s for s in found.sources})
    return known


def gpu_models(target) -> list[str]:
    """The models in scope whose config has KIND_GPU instances, by name."""
    return sorted(s.name for s in deployment_configs(target).sources if has_gpu_instances(s.config))
