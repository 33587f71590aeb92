"""The YAML settings file (--triton-config): the sections the settings own (server, models,
inputs, slo, report, run, container) and, through `phase_sections()`, each phase's own."""

from __future__ import annotations

import functools
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, create_model, model_validator

from ..launchers.schema import ContainerSection
from ..yamlschema import Section, setting
from .options import OPTION_BY_KEY, whole_count


def _checked_by(key: str) -> AfterValidator:
    """A YAML value that is also an option is checked by the option's own parser (the YAML keeps
    the text; build_settings converts it)."""
    option = OPTION_BY_KEY[key]

    def check(value: Any) -> Any:
        if value is not None:
            option.type(value)
        return value

    return AfterValidator(check)


def _option_field(key: str) -> Any:
    option = OPTION_BY_KEY[key]
    shown = option.default if option.default is not None else None
    extra = {"option": option.cli, "env": option.env}
    if shown is not None:
        extra["shown_default"] = str(shown)
    return Field(None, description=option.help, json_schema_extra=extra)


class ServerSection(Section):
    """`server:`: where the server is, or how to start it."""

    http_url: Annotated[str | None, _checked_by("triton_url")] = _option_field("triton_url")
    grpc_url: Annotated[str | None, _checked_by("triton_grpc_url")] = _option_field("triton_grpc_url")
    metrics_url: Annotated[str | None, _checked_by("triton_metrics_url")] = _option_field("triton_metrics_url")
    launch: Annotated[str | None, _checked_by("triton_launch")] = _option_field("triton_launch")
    model_repository: str | None = _option_field("triton_model_repository")
    request_timeout_s: Annotated[float | None, _checked_by("triton_request_timeout")] = _option_field("triton_request_timeout")
    startup_timeout_s: Annotated[float | None, _checked_by("triton_startup_timeout")] = _option_field("triton_startup_timeout")
    headers: dict[str, str] = setting(dict, "extra request headers (auth); values never appear in any output")
    image: str | None = setting(None, "deprecated: write container.image")
    gpus: str | None = setting(None, "deprecated: write container.gpus")
    shm_size: str | None = setting(None, "deprecated: write container.shm_size")
    ulimits: Annotated[dict[str, int | str] | str | None, _checked_by("triton_ulimits")] = setting(
        None, "deprecated: write container.ulimits")
    log_file: str | None = _option_field("triton_server_log")
    args: list[str] = setting(list, "extra tritonserver flags, used where the run starts the server")


def _value_range(value: list[float]) -> list[float]:
    if len(value) != 2 or value[0] > value[1]:
        raise ValueError(f"expected [low, high] with low <= high, got {value}")
    return value


class InputsSection(Section):
    """`inputs:`: how requests are synthesized."""

    dynamic_dim: Annotated[int | None, _checked_by("triton_dynamic_dim")] = _option_field("triton_dynamic_dim")
    shapes: dict[str, dict[str, list[Annotated[int, AfterValidator(whole_count)]]]] = setting(
        dict, "per model and input, the non-batch dims to send for variable (-1) dims")
    data: dict[str, str] = setting(
        dict, "per model, a perf_analyzer --input-data JSON file whose entries the requests carry (round-robin)")
    sequence_length: int = setting(20, "steps of each synthesized sequence sent to a sequence model (START, middle "
                                       "steps, END; perf_analyzer's --sequence-length); a data file's streams keep "
                                       "their own length", gt=0)
    ranges: dict[str, dict[str, Annotated[list[float], AfterValidator(_value_range)]]] = setting(
        dict, "per model and input, [low, high] of the synthesized values (integers inclusive)")


class ModelsSection(Section):
    """`models:`: the models in scope and the composing models of BLS models. A plain list is the
    models in scope alone (`models: [a, b]` is `models: {in_scope: [a, b]}`)."""

    @model_validator(mode="before")
    @classmethod
    def _a_list_is_the_scope(cls, value: Any) -> Any:
        return {"in_scope": value} if isinstance(value, list) else value

    in_scope: Annotated[list[str] | None, _checked_by("triton_models")] = _option_field("triton_models")
    bls_composing: dict[str, list[str]] = setting(
        dict, "per BLS model, the models it calls (perf_analyzer's --bls-composing-models): load checks read "
              "their statistics and name the slowest one")


class SloSection(Section):
    """One model's objectives (`slo.<model>`; `slo.default` for every model without its own)."""

    p99_ms: Annotated[float | None, _checked_by("triton_slo_p99_ms")] = setting(None, "p99 latency budget", unit="ms")
    min_throughput: Annotated[float | None, _checked_by("triton_slo_min_throughput")] = setting(
        None, "minimum throughput", unit="infer/s")
    ttft_p99_ms: float | None = setting(None, "streaming models: p99 time to first token", unit="ms", gt=0)
    itl_p99_ms: float | None = setting(None, "streaming models: p99 inter-token latency", unit="ms", gt=0)
    min_output_tokens_per_s: float | None = setting(None, "streaming models: lowest output token throughput",
                                                    unit="tokens/s", ge=0)


class ReportSection(Section):
    """`report:`."""

    dir: str | None = _option_field("readiness_report")
    progress_after_s: Annotated[float | None, _checked_by("triton_progress_after")] = _option_field(
        "triton_progress_after")
    baseline: str | None = _option_field("triton_baseline")


class RunSection(Section):
    """`run:`: the run as a whole."""

    budget: Annotated[str | float | None, _checked_by("triton_budget")] = _option_field("triton_budget")


class DeploymentSection(Section):
    """`deployment:`: the deployment's rendered manifests, judged against what the run measured."""

    manifests: str | None = _option_field("triton_deployment")
    kubernetes_version: Annotated[str | None, _checked_by("triton_kubernetes_version")] = _option_field(
        "triton_kubernetes_version")


class _FileBase(Section):
    """The sections this module owns; `file_model()` adds each phase's own."""

    server: ServerSection | None = None
    models: ModelsSection | None = None
    inputs: InputsSection | None = None
    slo: dict[str, SloSection] = setting(dict, "objectives per model; `default` for the rest")
    thresholds: dict[str, float] = setting(dict, "named thresholds (pytest_triton_ready/thresholds.py)")
    expectations: dict[str, Any] = setting(
        dict, "per model: deterministic, or a list of {inputs: ..., outputs: ...} its answers must match "
              "(values as in perf_analyzer's --input-data files)")
    report: ReportSection | None = None
    container: ContainerSection | None = None
    run: RunSection | None = None
    deployment: DeploymentSection | None = None


# The keys that moved to their launcher's own section: new spelling -> the old one, still read.
MOVED_KEYS = {"container.image": "server.image", "container.gpus": "server.gpus",
              "container.shm_size": "server.shm_size", "container.ulimits": "server.ulimits"}


@functools.cache
def phase_sections() -> dict[str, type[BaseModel]]:
    """Each YAML section a phase owns, by name: declared in the phase's module (imported here
    lazily: the phase packages import the settings themselves)."""
    from ..faults.schema import FaultsSection
    from ..fleet.targets import FleetSection
    from ..gate import GateSection
    from ..lint.schema import LintSection
    from ..load.profile import PerformanceSection
    from ..monitoring.config import MonitoringSection
    from ..operations.schema import OperationsSection
    from ..policy import AttachSection
    from ..security.schema import SecuritySection
    from ..soak.schema import SoakSection

    return {"lint": LintSection, "performance": PerformanceSection, "soak": SoakSection, "faults": FaultsSection,
            "monitoring": MonitoringSection, "operations": OperationsSection, "security": SecuritySection,
            "gate": GateSection, "attach": AttachSection, "fleet": FleetSection}


@functools.cache
def file_model() -> type[BaseModel]:
    """The whole YAML settings file: the sections declared here and every phase's."""
    fields: dict[str, Any] = {name: (model | None, None) for name, model in phase_sections().items()}
    return create_model("TritonReadyFile", __base__=_FileBase, __doc__="The YAML settings file.", **fields)


def sections() -> dict[str, type[BaseModel]]:
    """The sections code reads through settings.section_model(name)."""
    own = {"server": ServerSection, "models": ModelsSection, "inputs": InputsSection, "report": ReportSection,
           "container": ContainerSection, "run": RunSection,
           "deployment": DeploymentSection}
    return {**own, **phase_sections()}
