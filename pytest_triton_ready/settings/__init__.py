"""The one typed settings object, built once per run from CLI, environment, YAML and ini.

Precedence, highest first: a check's marker > command line > environment (TRITON_READY_*) >
YAML file (--triton-config) > ini file ([pytest] triton_*) > built-in default.
Every value remembers where it came from, so the report can say so and an error can name it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..deployment import DEFAULT_KUBERNETES_VERSION
from ..errors import TritonReadyError
from ..expectations import parse_expectation
from ..input_data import InputData, InputDataError, load_input_data
from ..inputs import InputDeclarations
from ..launchers.registry import launcher_kind
from ..launchers.schema import DEFAULT_SHM_SIZE
from ..launchers.ulimits import DEFAULT_ULIMITS
from ..progress import QUIET_S
from ..redaction import (
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
from ..thresholds import THRESHOLDS, ThresholdValue, pair_problems, threshold_problem
from ..yamlschema import Lines, SchemaError, load_yaml, validate
from .file import MOVED_KEYS, file_model, sections
from .options import OPTIONS

REDACTED = "***"


class SettingsError(TritonReadyError, ValueError):
    """A bad setting; the message names the value and where it came from."""

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
    triton_deployment: Path | str | None = None  # str: k8s://NAMESPACE/NAME
    triton_kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
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
