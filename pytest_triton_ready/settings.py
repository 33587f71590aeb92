"""The one typed settings object, built once per run from CLI, environment, YAML and ini.

Precedence, highest first: a check's marker > command line > environment (TRITON_READY_*) >
YAML file (--triton-config) > ini file ([pytest] triton_*) > built-in default.
Every value remembers where it came from, so the report can say so and an error can name it.
"""

from __future__ import annotations

import functools
import math
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import AfterValidator, BaseModel, Field, create_model, model_validator

from .addresses import host_port as _host_port
from .addresses import load_cluster as _load_cluster
from .errors import TritonReadyError
from .expectations import parse_expectation
from .input_data import InputData, InputDataError, load_input_data
from .inputs import InputDeclarations
from .launchers.registry import LAUNCHER_KINDS, LAUNCHER_NAMES, launcher_kind
from .launchers.schema import DEFAULT_SHM_SIZE, ContainerSection, container_help
from .launchers.ulimits import DEFAULT_ULIMITS
from .progress import QUIET_S
from .redaction import (
    MIN_SECRET_CHARS,
    Redactor,
    SecretError,
    expand,
    header_from_environment,
    header_from_file,
    secret_values,
    split_credentials,
    too_short,
)
from .thresholds import THRESHOLDS, ThresholdValue, pair_problems, threshold_problem
from .yamlschema import Lines, SchemaError, Section, load_yaml, setting, validate

LAUNCHERS = LAUNCHER_NAMES  # one list, in launchers/registry.py
REDACTED = "***"


class SettingsError(TritonReadyError, ValueError):
    """A bad setting; the message names the value and where it came from."""


@dataclass(frozen=True)
class Option:
    """A scalar setting reachable from every source. One help text serves CLI, ini, YAML and docs."""

    key: str
    yaml_path: str
    help: str
    type: Callable[[str], Any] = str
    default: Any = None
    metavar: str = "VALUE"
    flag: bool = False  # on the command line the bare option means true

    @property
    def cli(self) -> str:
        return "--" + self.key.replace("_", "-")

    @property
    def dest(self) -> str:
        return self.key

    @property
    def env(self) -> str:
        return "TRITON_READY_" + self.key.removeprefix("triton_").upper()

    @property
    def ini(self) -> str:
        return self.key


def _finite(text: str | float) -> float:
    if isinstance(text, bool):
        raise ValueError(f"must be a number, got {text!r}")
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {text}")
    return value


def _positive_float(text: str | float) -> float:
    value = _finite(text)
    if value <= 0:
        raise ValueError(f"must be positive, got {text}")
    return value


def _non_negative_float(text: str | float) -> float:
    value = _finite(text)
    if value < 0:
        raise ValueError(f"must be 0 or more, got {text}")
    return value


def _count(text: str | int) -> int:
    value = _finite(text)
    if value != int(value) or value < 1:
        raise ValueError(f"must be a whole number >= 1, got {text}")
    return int(value)


def _ulimits(value: Any) -> str:
    from .launchers.ulimits import ulimits_setting

    return ulimits_setting(value)


def _launcher(text: str) -> str:
    if text not in LAUNCHERS:
        raise ValueError(f"must be one of {', '.join(LAUNCHERS)}, got {text!r}")
    return text


def _duration(text: str | float) -> float:
    from .soak.duration import parse_duration

    seconds = parse_duration(text)
    if not math.isfinite(seconds):
        raise ValueError(f"expected a finite duration, got {text!r}")
    return seconds


def _flag(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"must be true or false, got {text!r}")


def _allow_list(text: str | list[str]) -> list[str]:
    from .plan import parse_allow  # the plan module owns the action classes

    return parse_allow(text)


def _model_list(text: str | list[str]) -> list[str]:
    if isinstance(text, list):
        return text
    return [m.strip() for m in text.split(",") if m.strip()]


def _http_url(text: str) -> str:
    """http(s)://[user:password@]host[:port][/path]; a bare host[:port] gets http:// (as before).
    Credentials are accepted (they move into a header later) and never repeated in an error."""
    text = str(text).strip()
    what = "an http(s)://host[:port] URL"
    full = text if "://" in text else f"http://{text}"
    shown, _, _ = split_credentials(full)
    parts = urlsplit(full)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"expected {what}, got {shown!r} (scheme {parts.scheme!r})")
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if parts.query or parts.fragment or "@" in netloc:
        raise ValueError(f"expected {what}, got {shown!r}")
    _host_port(netloc, what, shown)
    return full


def _grpc_address(text: str) -> str:
    """host:port (grpc:// or dns: prefixes are not accepted: the client takes host:port)."""
    text = str(text).strip()
    what = "a gRPC host:port"
    if "://" in text or "/" in text:
        raise ValueError(f"expected {what} without a scheme or path, got {text!r}")
    _host_port(text, what, text)
    if not re.search(r":\d+$", text):
        raise ValueError(f"expected {what} (with a port), got {text!r}")
    return text


OPTIONS: tuple[Option, ...] = (
    Option("triton_url", "server.http_url", "HTTP URL of the Triton server under test, e.g. http://host:8000.", _http_url, metavar="URL"),
    Option("triton_grpc_url", "server.grpc_url", "gRPC address (host:port); default: the HTTP host, port 8001 (or the launched server's).", _grpc_address, metavar="HOST:PORT"),
    Option("triton_metrics_url", "server.metrics_url", "Prometheus metrics URL; default: the HTTP host, port 8002, path /metrics.", _http_url, metavar="URL"),
    Option("triton_launch", "server.launch", "; ".join(f"{kind.name} ({kind.summary})" for kind in LAUNCHER_KINDS.values()) + ".", _launcher, metavar="KIND"),
    Option("triton_model_repository", "server.model_repository", "Model repository to lint and, for launchers, to serve; default for embedded: the packaged demo repository.", Path, metavar="DIR"),
    Option("triton_models", "models", "Comma-separated models in scope; default: every model in the repository index.", _model_list, metavar="M1,M2"),
    Option("triton_request_timeout", "server.request_timeout_s", "Timeout of one request to the server, in seconds.", _positive_float, 10.0, "SECONDS"),
    Option("triton_startup_timeout", "server.startup_timeout_s", "How long a launched server may take to become ready, in seconds.", _positive_float, 120.0, "SECONDS"),
    Option("triton_image", "container.image", container_help("image"), metavar="IMAGE"),
    Option("triton_gpus", "container.gpus", container_help("gpus"), metavar="GPUS"),
    Option("triton_shm_size", "container.shm_size", container_help("shm_size"), str, DEFAULT_SHM_SIZE, "SIZE"),
    Option("triton_ulimits", "container.ulimits", container_help("ulimits"), _ulimits, DEFAULT_ULIMITS, "LIMITS"),
    Option("triton_server_log", "server.log_file", "Keep the launched server's whole log in this file when the run ends.", Path, None, "FILE"),
    Option("triton_dynamic_dim", "inputs.dynamic_dim", "Size given to a variable (-1) input dimension when synthesizing requests.", _count, 16, "N"),
    Option("triton_slo_p99_ms", "slo.default.p99_ms", "Default latency budget: p99 in milliseconds, for models without their own SLO.", _positive_float, None, "MS"),
    Option("triton_slo_min_throughput", "slo.default.min_throughput", "Default minimum throughput in inferences per second.", _positive_float, None, "INFER_PER_S"),
    Option("triton_soak", "soak.duration", "PERF-3 soak duration: 90s, 30m, 24h (a nightly job); 0 turns the soak off (PERF-3 then reports INCOMPLETE).", _duration, 60.0, "DURATION"),
    Option("triton_soak_evidence", "soak.evidence", "PERF-3: a nightly soak's readiness.json (its report directory, or its soak journal) that judges the leak rule when this run's soak is too short to: accepted only when the server version, every model's READY versions and config hash match this server, it is not older than soak_evidence_max_age_h, it ran at least soak_leak_min_duration_s and it passed.", Path, None, "PATH"),
    Option("triton_tune_batching", "performance.tune_batching", "CFG-2: reload batched models with a few max_queue_delay_microseconds values, measure each, recommend the best and restore the original config (needs explicit model control).", _flag, False, "BOOL", flag=True),
    Option("triton_allow", "attach.allow", "Classes of action allowed on an attached server (a server this run did not start): reload, faults, saturate, large_payloads; comma-separated. Default: none (the run changes nothing and stays under the load ceiling).", _allow_list, None, "A,B"),
    Option("triton_load_cluster", "fleet.load_cluster", "Run the load engine's workers on a Ray cluster: auto, ray://HOST:PORT or HOST:PORT (needs the [distributed] extra); default: worker processes on this machine.", _load_cluster, None, "ADDRESS"),
    Option("triton_budget", "run.budget", "Time for the whole run, shared across phases and models by the plan's estimates: 15m, 1h; what it cuts is INCOMPLETE naming it. Default: no budget.", _duration, None, "DURATION"),
    Option("readiness_report", "report.dir", "Directory for readiness.json, readiness.md and readiness.html.", Path, Path("triton-ready-report"), "DIR"),
    Option("triton_progress_after", "report.progress_after_s", "A check still running after this many seconds gets a progress line on the terminal (what it is doing: the curve point, the fault experiment's phase), again at each new step, and a heartbeat saying what the step waits for while it lasts; 0: from the start.", _non_negative_float, QUIET_S, "SECONDS"),
    Option("triton_baseline", "report.baseline", "PERF-5: a previous readiness.json (or a directory of runs: the newest READY one) to compare this run with; none: PERF-5 is INCOMPLETE.", Path, None, "PATH"),
)
OPTION_BY_KEY = {option.key: option for option in OPTIONS}
OPTION_BY_YAML = {option.yaml_path: option for option in OPTIONS}


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
    shapes: dict[str, dict[str, list[Annotated[int, AfterValidator(_count)]]]] = setting(
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


class _FileBase(Section):
    """The sections settings.py owns; `file_model()` adds each phase's own."""

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


# The keys that moved to their launcher's own section: new spelling -> the old one, still read.
MOVED_KEYS = {"container.image": "server.image", "container.gpus": "server.gpus",
              "container.shm_size": "server.shm_size", "container.ulimits": "server.ulimits"}


@functools.cache
def phase_sections() -> dict[str, type[BaseModel]]:
    """Each YAML section a phase owns, by name: declared in the phase's module (imported here
    lazily: the phase packages import the settings themselves)."""
    from .faults.plan import FaultsSection
    from .fleet.targets import FleetSection
    from .gate import GateSection
    from .lint.schema import LintSection
    from .load.profile import PerformanceSection
    from .monitoring.config import MonitoringSection
    from .operations.schema import OperationsSection
    from .plan import AttachSection
    from .security.schema import SecuritySection
    from .soak.plan import SoakSection

    return {"lint": LintSection, "performance": PerformanceSection, "soak": SoakSection, "faults": FaultsSection,
            "monitoring": MonitoringSection, "operations": OperationsSection, "security": SecuritySection,
            "gate": GateSection, "attach": AttachSection, "fleet": FleetSection}


@functools.cache
def file_model() -> type[BaseModel]:
    """The whole YAML settings file: settings.py's sections and every phase's."""
    fields: dict[str, Any] = {name: (model | None, None) for name, model in phase_sections().items()}
    return create_model("TritonReadyFile", __base__=_FileBase, __doc__="The YAML settings file.", **fields)


def sections() -> dict[str, type[BaseModel]]:
    """The sections code reads through settings.section_model(name)."""
    own = {"server": ServerSection, "models": ModelsSection, "inputs": InputsSection, "report": ReportSection,
           "container": ContainerSection, "run": RunSection}
    return {**own, **phase_sections()}


@dataclass(frozen=True)
class SLO:
    """A model's service-level objective: p99 latency budget and minimum throughput."""

    p99_ms: float | None = None
    min_throughput: float | None = None


@dataclass
class Settings:
    """Everything a run needs to know. Built by `build_settings`; never mutated by checks."""

    triton_url: str | None = None
    triton_grpc_url: str | None = None
    triton_metrics_url: str | None = None
    triton_launch: str | None = None
    triton_model_repository: Path | None = None
    triton_models: list[str] = field(default_factory=list)
    triton_request_timeout: float = 10.0
    triton_startup_timeout: float = 120.0
    triton_image: str | None = None
    triton_gpus: str | None = None
    triton_shm_size: str = DEFAULT_SHM_SIZE
    triton_ulimits: str = DEFAULT_ULIMITS
    triton_server_log: Path | None = None
    triton_dynamic_dim: int = 16
    triton_slo_p99_ms: float | None = None
    triton_slo_min_throughput: float | None = None
    triton_soak: float = 60.0
    triton_soak_evidence: Path | None = None
    triton_tune_batching: bool = False
    triton_allow: list[str] | None = None
    triton_load_cluster: str | None = None
    triton_budget: float | None = None
    readiness_report: Path = Path("triton-ready-report")
    triton_progress_after: float = QUIET_S
    triton_baseline: Path | None = None
    headers: dict[str, str] = field(default_factory=dict)
    url_secrets: list[str] = field(default_factory=list)  # credentials that were in a URL
    input_shapes: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    input_ranges: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    input_data: dict[str, InputData] = field(default_factory=dict)
    expectations: dict[str, Any] = field(default_factory=dict)
    sequence_length: int = 20
    bls_composing: dict[str, list[str]] = field(default_factory=dict)  # BLS model -> the models it calls
    slos: dict[str, SLO] = field(default_factory=dict)
    threshold_overrides: dict[str, ThresholdValue] = field(default_factory=dict)
    yaml: dict[str, Any] = field(default_factory=dict)
    config_file: Path | None = None
    sources: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # for messages: "cli", "env VAR", "FILE:LINE (key)", "ini"
    _typed: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def input_declarations(self) -> InputDeclarations:
        """What the requests carry per model: declared data, shapes and value ranges."""
        return InputDeclarations(self.input_shapes, self.input_ranges, self.input_data, self.triton_dynamic_dim,
                                 self.sequence_length)

    @property
    def launch(self) -> str:
        return self.triton_launch or ("attach" if self.triton_url else "embedded")

    def slo_for(self, model: str) -> SLO:
        """The model's own SLO from the YAML, else the default one."""
        default = SLO(self.triton_slo_p99_ms, self.triton_slo_min_throughput)
        own = self.slos.get(model)
        if own is None:
            return default
        return SLO(own.p99_ms if own.p99_ms is not None else default.p99_ms,
                   own.min_throughput if own.min_throughput is not None else default.min_throughput)

    def threshold(self, name: str) -> ThresholdValue:
        """A named threshold (see thresholds.py) with its source."""
        if name in self.threshold_overrides:
            return self.threshold_overrides[name]
        spec = THRESHOLDS[name]
        return ThresholdValue(name, spec.default, spec.unit, "default")

    def section_model(self, name: str) -> Any:
        """A YAML section as its typed model (defaults filled in), e.g. `section_model("soak").window`."""
        raw = self.yaml.get(name) or {}
        cached = self._typed.get(name)
        if cached is not None and cached[0] is raw:
            return cached[1]
        model = sections()[name]
        where = f"{self.config_file}" if self.config_file else "the settings"
        try:
            typed = validate(model, raw, where, prefix=(name,))
        except SchemaError as exc:
            raise SettingsError(str(exc)) from None
        self._typed[name] = (raw, typed)
        return typed

    def redacted(self) -> dict[str, Any]:
        """The settings as shown in a report: header values replaced, sources kept."""
        shown: dict[str, Any] = {}
        for option in OPTIONS:
            value = getattr(self, option.key)
            shown[option.key] = str(value) if isinstance(value, Path) else value
        shown["headers"] = {name: REDACTED for name in self.headers}
        shown["slos"] = {m: vars(s) for m, s in self.slos.items()}
        shown["thresholds"] = {n: {"value": t.value, "source": t.source} for n, t in self.threshold_overrides.items()}
        shown["config_file"] = str(self.config_file) if self.config_file else None
        shown["sources"] = dict(self.sources)
        return shown

    def secrets(self) -> list[str]:
        """Values that must never appear in any output: header values (and their credential
        part), URL credentials."""
        return secret_values(self.headers, self.url_secrets)

    def redactor(self) -> Redactor:
        return Redactor(self.secrets())


def derived_url(http_url: str, port: int, path: str = "") -> str:
    """The same host as `http_url` on another port: how gRPC and metrics URLs are defaulted."""
    parts = urlsplit(http_url if "://" in http_url else f"http://{http_url}")
    host = parts.hostname or "localhost"
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, f"{host}:{port}", path, "", ""))


def build_settings(
    cli: dict[str, Any],
    ini: dict[str, Any],
    environ: dict[str, str] | None = None,
    config_file: str | None = None,
    cli_headers: list[str] | None = None,
    cli_thresholds: list[str] | None = None,
    cli_header_env: list[str] | None = None,
    cli_header_files: list[str] | None = None,
    cli_input_data: list[str] | None = None,
) -> Settings:
    """Merge every source into one Settings; raise SettingsError naming the bad value's origin."""
    environ = dict(os.environ if environ is None else environ)
    config_file = config_file or environ.get("TRITON_READY_CONFIG") or ini.get("triton_config") or None
    data: dict[str, Any] = {}
    lines = Lines()
    yaml_source = ""
    path: Path | None = None
    if config_file:
        path = Path(config_file)
        try:
            _, data, lines = load_yaml(path, file_model())
        except SchemaError as exc:
            raise SettingsError(str(exc)) from None
        yaml_source = f"yaml:{path}"

    def yaml_where(*loc: str | int) -> str:
        line = lines.value(tuple(loc))
        return f"{path}:{line}" if line else f"{path}"

    settings = Settings(config_file=path, yaml=data)
    _warn_moved_keys(data, yaml_where)
    for option in OPTIONS:
        candidates = (
            (cli.get(option.dest), "cli", "cli"),
            (environ.get(option.env), f"env:{option.env}", f"env {option.env}"),
            _yaml_candidate(data, option.yaml_path, yaml_source, yaml_where),
            (ini.get(option.ini) or None, "ini", f"ini {option.ini}"),
        )
        for raw, source, origin in candidates:
            if raw is None or raw == "":
                continue
            try:
                value = option.type(raw)
            except (TypeError, ValueError) as exc:
                raise SettingsError(f"{option.cli} from {source}: {exc}") from None
            setattr(settings, option.key, value)
            settings.sources[option.key] = source
            settings.origins[option.key] = origin
            break
        else:
            setattr(settings, option.key, option.default)
            settings.sources[option.key] = "default"
            settings.origins[option.key] = "default"

    try:
        _read_headers(settings, data, environ, yaml_where, cli_headers, cli_header_env, cli_header_files)
    except SecretError as exc:
        raise SettingsError(str(exc)) from None

    if isinstance(data.get("models"), dict):
        settings.bls_composing = {bls: list(called) for bls, called in data["models"].get("bls_composing", {}).items()}
    inputs = data.get("inputs", {})
    settings.input_shapes = inputs.get("shapes", {})
    settings.sequence_length = int(inputs.get("sequence_length") or 20)
    settings.input_ranges = {m: {i: (float(r[0]), float(r[1])) for i, r in per.items()}
                             for m, per in inputs.get("ranges", {}).items()}
    for model, expected in data.get("expectations", {}).items():
        try:
            settings.expectations[model] = parse_expectation(expected, f"expectations.{model}")
        except InputDataError as exc:
            raise SettingsError(f"{yaml_where('expectations', model)}: {exc}") from None
    base = path.parent if path else Path.cwd()
    declared_files = [(m, str(f), f"{yaml_where('inputs', 'data', m)} (inputs.data.{m})")
                      for m, f in inputs.get("data", {}).items()]
    for item in cli_input_data or []:
        model, sep, file = item.partition("=")
        if not sep or not model.strip() or not file.strip():
            raise SettingsError(f"--triton-input-data from cli: expected MODEL=FILE, got {item!r}")
        declared_files.append((model.strip(), file.strip(), "--triton-input-data from cli"))
    for model, file, origin in declared_files:
        file_path = Path(file) if Path(file).is_absolute() or origin.startswith("--") else base / file
        try:
            settings.input_data[model] = load_input_data(file_path)
        except InputDataError as exc:
            raise SettingsError(f"{origin}: {exc}") from None
    for model, slo in data.get("slo", {}).items():
        if model != "default":
            settings.slos[model] = SLO(slo.get("p99_ms"), slo.get("min_throughput"))

    for name, value in data.get("thresholds", {}).items():
        if name not in THRESHOLDS:
            raise SettingsError(f"{yaml_where('thresholds', name)}: {threshold_problem(name, value)}")
        problem = THRESHOLDS[name].range.problem(value)
        if problem:
            raise SettingsError(f"{yaml_where('thresholds', name)}: key 'thresholds.{name}': {problem}")
        settings.threshold_overrides[name] = ThresholdValue(name, float(value), THRESHOLDS[name].unit, yaml_source)
    for item in cli_thresholds or []:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise SettingsError(f"--triton-threshold from cli: expected NAME=VALUE, got {item!r}")
        try:
            number = float(value)
        except ValueError:
            raise SettingsError(f"--triton-threshold from cli: {name} must be a number, got {value!r}") from None
        problem = threshold_problem(name, number)
        if problem:
            raise SettingsError(f"--triton-threshold {name}={value.strip()} from cli: {problem}")
        settings.threshold_overrides[name] = ThresholdValue(name, number, THRESHOLDS[name].unit, "cli")
    values = {name: settings.threshold(name).value for name in THRESHOLDS}
    for problem in pair_problems(values):
        given = [n for n in ("gpu_utilization_min", "gpu_utilization_max") if n in settings.threshold_overrides]
        where = ", ".join(f"{n} from {settings.threshold_overrides[n].source}" for n in given)
        raise SettingsError(f"thresholds contradict each other: {problem} ({where})")

    _check_conflicts(settings)
    if settings.triton_url and not settings.triton_url.startswith(("http://", "https://")):
        settings.triton_url = "http://" + settings.triton_url
    _move_url_credentials(settings)
    short = too_short(settings.headers)
    if short:
        raise SettingsError(f"header {short[0]}: its value is shorter than {MIN_SECRET_CHARS} characters, too short to "
                            "keep out of every output without also hiding ordinary text; header values are "
                            "treated as secrets")
    return settings


def _yaml_candidate(data: dict[str, Any], yaml_path: str, source: str,
                    yaml_where: Callable[..., str]) -> tuple[Any, str, str]:
    """(value, source, origin) of an option in the YAML; a key that moved is still read under its
    old spelling when the new one is not set."""
    old = MOVED_KEYS.get(yaml_path)
    if _dig(data, yaml_path) is None and old and _dig(data, old) is not None:
        yaml_path = old
    return _dig(data, yaml_path), source, f"{yaml_where(*yaml_path.split('.'))} ({yaml_path})"


def _warn_moved_keys(data: dict[str, Any], yaml_where: Callable[..., str]) -> None:
    """One deprecation line per key written under its old spelling."""
    for new, old in MOVED_KEYS.items():
        if _dig(data, old) is None:
            continue
        ignored = "; it is ignored, since container.{} is set too".format(new.split(".", 1)[1]) \
            if _dig(data, new) is not None else ""
        warnings.warn(f"{yaml_where(*old.split('.'))}: {old} is deprecated, write {new} (the container "
                      f"launcher's own section){ignored}", FutureWarning, stacklevel=3)


def _read_headers(settings: Settings, data: dict[str, Any], environ: dict[str, str], yaml_where: Callable[..., str],
                  cli_headers: list[str] | None, cli_header_env: list[str] | None,
                  cli_header_files: list[str] | None) -> None:
    """Request headers, weakest source first: the YAML file, then the command line; `${VAR}` is
    expanded from the environment in both."""
    for name, value in data.get("server", {}).get("headers", {}).items():
        settings.headers[name] = expand(str(value), environ, f"{yaml_where('server', 'headers', name)} "
                                                             f"(server.headers.{name})")
    for header in cli_headers or []:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise SettingsError(f"--triton-header from cli: expected 'Name: value', got {name.strip()!r}")
        settings.headers[name.strip()] = expand(value.strip(), environ, f"--triton-header {name.strip()} from cli")
    for spec in cli_header_env or []:
        name, value = header_from_environment(spec, environ, "--triton-header-env from cli")
        settings.headers[name] = value
    for spec in cli_header_files or []:
        name, value = header_from_file(spec, "--triton-header-file from cli")
        settings.headers[name] = value


def _move_url_credentials(settings: Settings) -> None:
    """`https://user:pw@host` becomes `https://host` and an Authorization header (unless one is
    set); the credentials join the secrets."""
    for key in ("triton_url", "triton_metrics_url"):
        plain, authorization, secrets = split_credentials(getattr(settings, key))
        if not secrets:
            continue
        setattr(settings, key, plain)
        settings.url_secrets.extend(secrets)
        if authorization and key == "triton_url":
            settings.headers.setdefault("Authorization", authorization)


# Higher is stronger; a value's source decides which of two conflicting settings the user meant.
_RANK = {"default": 0, "ini": 1, "yaml": 2, "env": 3, "cli": 4}


def _rank(source: str) -> int:
    return _RANK.get(source.split(":", 1)[0], 0)


def _check_conflicts(settings: Settings) -> None:
    """Settings that cannot both hold; the message names both and where each came from."""
    sources, origins = settings.sources, settings.origins
    owns = launcher_kind(settings.triton_launch).capabilities.owns_process if settings.triton_launch else None
    if owns is False and not settings.triton_url:
        raise SettingsError(f"--triton-launch={settings.triton_launch} from {sources['triton_launch']} needs "
                            "--triton-url: it reaches a server that is already running")
    if settings.triton_url and owns and _rank(sources["triton_url"]) >= _rank(sources["triton_launch"]):
        # The launcher would start its own server and the URL would be silently ignored.
        raise SettingsError(
            f"--triton-url from {origins['triton_url']} conflicts with --triton-launch={settings.triton_launch} "
            f"from {origins['triton_launch']}: a launched server has its own URL; drop one of them")


def _dig(data: dict[str, Any], dotted: str) -> Any:
    if dotted == "models" and isinstance(data.get("models"), dict):
        dotted = "models.in_scope"  # `models:` written as a mapping (ModelsSection)
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


# -- the settings reference (docs/settings.md is this text; a test keeps them equal) ------------
SECTION_DOCS = {
    "server": "docs/container-and-gpu.md", "container": "docs/container-and-gpu.md", "models": "docs/models.md",
    "inputs": "README.md", "report": "docs/report.md",
    "lint": "docs/config-rules.md", "performance": "docs/load-engine.md", "soak": "docs/soak.md",
    "faults": "docs/faults.md", "monitoring": "docs/monitoring.md", "operations": "docs/operations-security.md",
    "security": "docs/operations-security.md", "fleet": "docs/fleet.md",
}


def settings_reference() -> str:
    """docs/settings.md, generated from OPTIONS, the section models and THRESHOLDS."""
    from .yamlschema import settings_table

    out = [
        "# Settings reference",
        "",
        "Generated from the declarations in the code (`OPTIONS` and the section models in",
        "`pytest_triton_ready/settings.py`, each phase's section model, `pytest_triton_ready/thresholds.py`);",
        "`tests/test_settings_declared.py` fails when this file and the code disagree. Regenerate with",
        "",
        "    python -c 'from pytest_triton_ready.settings import settings_reference as r; print(r(), end=\"\")' > docs/settings.md",
        "",
        "Precedence, highest first: a check's marker > command line > environment > YAML > ini > default.",
        "A bad value (wrong type, out of range, nan or inf, a malformed URL, an unknown key or threshold)",
        "or two settings that contradict each other is a usage error (exit code 4) naming the setting and",
        "where it came from: `cli`, the environment variable, `FILE:LINE` of the YAML file, or the ini key.",
        "",
        "## Options",
        "",
        "| option | environment | ini | YAML | default | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for option in OPTIONS:
        default = "none" if option.default is None else f"`{option.default}`"
        out.append(f"| `{option.cli}` | `{option.env}` | `{option.ini}` | `{option.yaml_path}` | {default} | "
                   f"{option.help} |")
    out += ["| `--triton-header 'Name: value'` | | | `server.headers` | none | extra request header (auth); "
            "repeatable; values never appear in any output |",
            "| `--triton-threshold NAME=VALUE` | | | `thresholds.NAME` | see below | override a named threshold; "
            "repeatable |",
            "| `--triton-input-data MODEL=FILE` | | | `inputs.data.MODEL` | none | requests to MODEL carry the "
            "entries of FILE, a perf_analyzer --input-data JSON file (docs/models.md); repeatable |",
            "| `--triton-config` | `TRITON_READY_CONFIG` | `triton_config` | | none | the YAML file |", ""]
    out += ["`--triton-url` together with `--triton-launch=embedded` or `container` is a usage error unless",
            "the launcher comes from a stronger source than the URL (a launched server has its own URL).", ""]
    out += ["## YAML sections", ""]
    models = sections()
    root = file_model()
    for name in root.model_fields:
        model = models.get(name)
        if model is None:
            continue
        doc = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split())
        where = SECTION_DOCS.get(name, "README.md")
        link = f" See [{where.removeprefix('docs/')}]({where.removeprefix('docs/')})." if where != "README.md" else ""
        out += [f"### `{name}:`", "", doc + link,
                "", settings_table(model, name).rstrip("\n"), ""]
    out += ["### `slo:`, `thresholds:`", "",
            "`slo.<model>` (and `slo.default`):",
            "", settings_table(SloSection, "slo.<model>").rstrip("\n"), "",
            "## Thresholds", "",
            "Every number a check compares with; `thresholds.NAME` in the YAML or `--triton-threshold NAME=VALUE`.",
            "A value outside its range is a usage error.", "",
            "| threshold | default | unit | range | meaning |", "| --- | --- | --- | --- | --- |"]
    for tname, spec in THRESHOLDS.items():
        kind = spec.range.describe() + (", whole number" if spec.range.integer else "")
        out.append(f"| `{tname}` | {spec.default:g} | {spec.unit} | {kind} | {spec.help} |")
    return "\n".join(out) + "\n"
