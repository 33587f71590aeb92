"""The one typed settings object, built once per run from CLI, environment, YAML and ini.

Precedence, highest first: a check's marker > command line > environment (TRITON_READY_*) >
YAML file (--triton-config) > ini file ([pytest] triton_*) > built-in default.
Every value remembers where it came from, so the report can say so and an error can name it.
"""

from __future__ import annotations

import datetime as dt

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

from .operations.schema import OPERATIONS_SCHEMA
from .security.schema import SECURITY_SCHEMA
from .monitoring.config import SCHEMA as MONITORING_SCHEMA
from .thresholds import THRESHOLDS, ThresholdValue
from .yamlschema import MapOf, SchemaError, load_yaml

LAUNCHERS = ("attach", "embedded", "container")
REDACTED = "***"


class SettingsError(ValueError):
    """A bad setting; the message names the value and where it came from."""


@dataclass(frozen=True)
class Option:
    """A scalar setting reachable from every source. One help text serves CLI and ini."""

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


def _positive_float(text: str | float) -> float:
    value = float(text)
    if value <= 0:
        raise ValueError(f"must be positive, got {text}")
    return value


def _launcher(text: str) -> str:
    if text not in LAUNCHERS:
        raise ValueError(f"must be one of {', '.join(LAUNCHERS)}, got {text!r}")
    return text


def _duration(text: str | float) -> float:
    from .soak.duration import parse_duration

    return parse_duration(text)


def _flag(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"must be true or false, got {text!r}")


def _model_list(text: str | list[str]) -> list[str]:
    if isinstance(text, list):
        return text
    return [m.strip() for m in text.split(",") if m.strip()]


OPTIONS: tuple[Option, ...] = (
    Option("triton_url", "server.http_url", "HTTP URL of the Triton server under test, e.g. http://host:8000.", metavar="URL"),
    Option("triton_grpc_url", "server.grpc_url", "gRPC address (host:port); default: the HTTP host, port 8001 (or the launched server's).", metavar="HOST:PORT"),
    Option("triton_metrics_url", "server.metrics_url", "Prometheus metrics URL; default: the HTTP host, port 8002, path /metrics.", metavar="URL"),
    Option("triton_launch", "server.launch", "attach (a running server, the default with --triton-url), embedded (start the tritonserver of the nvidia-pytriton wheel here) or container.", _launcher, metavar="KIND"),
    Option("triton_model_repository", "server.model_repository", "Model repository to lint and, for launchers, to serve; default for embedded: the packaged demo repository.", Path, metavar="DIR"),
    Option("triton_models", "models", "Comma-separated models in scope; default: every model in the repository index.", _model_list, metavar="M1,M2"),
    Option("triton_request_timeout", "server.request_timeout_s", "Timeout of one request to the server, in seconds.", _positive_float, 10.0, "SECONDS"),
    Option("triton_startup_timeout", "server.startup_timeout_s", "How long a launched server may take to become ready, in seconds.", _positive_float, 120.0, "SECONDS"),
    Option("triton_image", "server.image", "Container image for --triton-launch=container.", metavar="IMAGE"),
    Option("triton_gpus", "server.gpus", "GPUs for the container launcher: all (the default), none, or indices or UUIDs like 0,1.", metavar="GPUS"),
    Option("triton_shm_size", "server.shm_size", "Shared memory of the container launcher's container (docker --shm-size), e.g. 1g.", str, "1g", "SIZE"),
    Option("triton_server_log", "server.log_file", "Keep the launched server's whole log in this file when the run ends.", Path, None, "FILE"),
    Option("triton_dynamic_dim", "inputs.dynamic_dim", "Size given to a variable (-1) input dimension when synthesizing requests.", int, 16, "N"),
    Option("triton_slo_p99_ms", "slo.default.p99_ms", "Default latency budget: p99 in milliseconds, for models without their own SLO.", _positive_float, None, "MS"),
    Option("triton_slo_min_throughput", "slo.default.min_throughput", "Default minimum throughput in inferences per second.", float, None, "INFER_PER_S"),
    Option("triton_soak", "soak.duration", "PERF-3 soak duration: 90s, 30m, 24h (a nightly job); 0 turns the soak off (PERF-3 then reports INCOMPLETE).", _duration, 60.0, "DURATION"),
    Option("triton_tune_batching", "performance.tune_batching", "CFG-2: reload batched models with a few max_queue_delay_microseconds values, measure each, recommend the best and restore the original config (needs explicit model control).", _flag, False, "BOOL", flag=True),
    Option("readiness_report", "report.dir", "Directory for readiness.json, readiness.md and readiness.html.", Path, Path("triton-ready-report"), "DIR"),
    Option("triton_baseline", "report.baseline", "PERF-5: a previous readiness.json (or a directory of runs: the newest READY one) to compare this run with; none: PERF-5 is INCOMPLETE.", Path, None, "PATH"),
)

SLO_SCHEMA = {"p99_ms": float, "min_throughput": float}

# The YAML file's whole shape. A key not in here is a usage error naming file and line.
YAML_SCHEMA: dict[str, Any] = {
    "server": {
        "http_url": str,
        "grpc_url": str,
        "metrics_url": str,
        "launch": str,
        "model_repository": str,
        "request_timeout_s": float,
        "startup_timeout_s": float,
        "headers": MapOf(str),
        "image": str,
        "gpus": str,
        "shm_size": str,
        "log_file": str,
        "args": [str],
    },
    "models": [str],
    "inputs": {"dynamic_dim": int, "shapes": MapOf(MapOf([int]))},
    "slo": MapOf(SLO_SCHEMA),
    "thresholds": MapOf(float),
    "report": {"dir": str, "baseline": str},
    "lint": {
        "disable": [str],
        "nondeterministic_models": [str],
        "stateful_models": [str],
        "preferred_batch_size_models": [str],
        "rollout": MapOf(str),
        "measure_model_memory": bool,
    },
    "operations": OPERATIONS_SCHEMA,
    "security": SECURITY_SCHEMA,
    "monitoring": MONITORING_SCHEMA,
    "soak": {
        "duration": str, "window": str, "warmup": str, "rate": float, "rates": MapOf(float), "models": [str],
        "journal": str, "rate_fraction": float, "success_rate_min": float, "p99_drift_ratio_max": float,
        "p99_drift_min_ms": float, "server_memory_slope_max_mb_h": float, "gpu_memory_slope_max_mb_h": float,
        "leak_min_growth_mb": float, "pending_growth_max": float, "runner_memory_slope_max_mb_h": float,
        "dropped_max": float,
    },
    "faults": {"model": str, "rate_per_s": float, "steady_s": float, "observe_s": float, "settle_s": float,
               "recovery_timeout_s": float, "probe_span_s": float, "protocol": str},
    "performance": {"tune_batching": bool, "tune_queue_delays_us": [int]},
    "gate": {"allow_flaky": bool, "waivers": [{"check": str, "reason": str, "owner": str, "expires": dt.date}]},
}
ROLLOUTS = ("canary", "blue-green")


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
    triton_shm_size: str = "1g"
    triton_server_log: Path | None = None
    triton_dynamic_dim: int = 16
    triton_slo_p99_ms: float | None = None
    triton_slo_min_throughput: float | None = None
    triton_soak: float = 60.0
    triton_tune_batching: bool = False
    readiness_report: Path = Path("triton-ready-report")
    triton_baseline: Path | None = None
    headers: dict[str, str] = field(default_factory=dict)
    input_shapes: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    slos: dict[str, SLO] = field(default_factory=dict)
    threshold_overrides: dict[str, ThresholdValue] = field(default_factory=dict)
    yaml: dict[str, Any] = field(default_factory=dict)
    config_file: Path | None = None
    sources: dict[str, str] = field(default_factory=dict)

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

    def section(self, name: str) -> dict[str, Any]:
        """A YAML section a phase owns (e.g. `monitoring`), empty when the file has none."""
        return self.yaml.get(name) or {}

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
        """Values that must never appear in any output."""
        return [v for v in self.headers.values() if v]


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
) -> Settings:
    """Merge every source into one Settings; raise SettingsError naming the bad value's origin."""
    environ = dict(os.environ if environ is None else environ)
    config_file = config_file or environ.get("TRITON_READY_CONFIG") or ini.get("triton_config") or None
    data: dict[str, Any] = {}
    yaml_source = ""
    path: Path | None = None
    if config_file:
        path = Path(config_file)
        try:
            data = load_yaml(path, YAML_SCHEMA)
        except SchemaError as exc:
            raise SettingsError(str(exc)) from None
        yaml_source = f"yaml:{path}"

    settings = Settings(config_file=path, yaml=data)
    for option in OPTIONS:
        candidates = (
            (cli.get(option.dest), "cli"),
            (environ.get(option.env), f"env:{option.env}"),
            (_dig(data, option.yaml_path), yaml_source),
            (ini.get(option.ini) or None, "ini"),
        )
        for raw, source in candidates:
            if raw is None or raw == "":
                continue
            try:
                value = option.type(raw)
            except (TypeError, ValueError) as exc:
                raise SettingsError(f"{option.cli} from {source}: {exc}") from None
            setattr(settings, option.key, value)
            settings.sources[option.key] = source
            break
        else:
            setattr(settings, option.key, option.default)
            settings.sources[option.key] = "default"

    settings.headers = dict(data.get("server", {}).get("headers", {}))
    for header in cli_headers or []:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise SettingsError(f"--triton-header from cli: expected 'Name: value', got {name.strip()!r}")
        settings.headers[name.strip()] = value.strip()

    inputs = data.get("inputs", {})
    settings.input_shapes = inputs.get("shapes", {})
    for model, slo in data.get("slo", {}).items():
        if model != "default":
            settings.slos[model] = SLO(slo.get("p99_ms"), slo.get("min_throughput"))

    for name, value in data.get("thresholds", {}).items():
        settings.threshold_overrides[name] = _threshold(name, value, yaml_source)
    for item in cli_thresholds or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise SettingsError(f"--triton-threshold from cli: expected NAME=VALUE, got {item!r}")
        try:
            number = float(value)
        except ValueError:
            raise SettingsError(f"--triton-threshold from cli: {name} must be a number, got {value!r}") from None
        settings.threshold_overrides[name.strip()] = _threshold(name.strip(), number, "cli")

    for model, kind in data.get("lint", {}).get("rollout", {}).items():
        if kind not in ROLLOUTS:
            raise SettingsError(f"lint.rollout.{model} from {yaml_source}: expected one of {', '.join(ROLLOUTS)}, got {kind!r}")

    if settings.triton_launch == "attach" and not settings.triton_url:
        raise SettingsError(f"--triton-launch=attach from {settings.sources['triton_launch']} needs --triton-url")
    if settings.triton_url and not settings.triton_url.startswith(("http://", "https://")):
        settings.triton_url = "http://" + settings.triton_url
    return settings


def _threshold(name: str, value: float, source: str) -> ThresholdValue:
    if name not in THRESHOLDS:
        known = ", ".join(sorted(THRESHOLDS))
        raise SettingsError(f"unknown threshold '{name}' from {source} (known: {known})")
    return ThresholdValue(name, float(value), THRESHOLDS[name].unit, source)


def _dig(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
