"""The scalar settings reachable from every source (command line, environment, YAML, ini): one
`Option` per key, with the parser that checks its value and the help text every source shares."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..addresses import host_port as _host_port
from ..addresses import load_cluster as _load_cluster
from ..deployment import DEFAULT_KUBERNETES_VERSION
from ..launchers.registry import LAUNCHER_KINDS, LAUNCHER_NAMES
from ..launchers.schema import DEFAULT_SHM_SIZE, container_help
from ..launchers.ulimits import DEFAULT_ULIMITS
from ..progress import QUIET_S
from ..redaction import split_credentials

LAUNCHERS = LAUNCHER_NAMES  # one list, in launchers/registry.py


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


def whole_count(text: str | int) -> int:
    value = _finite(text)
    if value != int(value) or value < 1:
        raise ValueError(f"must be a whole number >= 1, got {text}")
    return int(value)


def _ulimits(value: Any) -> str:
    from ..launchers.ulimits import ulimits_setting

    return ulimits_setting(value)


def _launcher(text: str) -> str:
    if text not in LAUNCHERS:
        raise ValueError(f"must be one of {', '.join(LAUNCHERS)}, got {text!r}")
    return text


def _duration(text: str | float) -> float:
    from ..duration import parse_duration

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
    from ..policy import parse_allow  # the policy module owns the action classes

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


def _deployment(text: str) -> Path | str:
    """A file or folder of manifests, or k8s://NAMESPACE/NAME (the live objects of a cluster)."""
    text = str(text).strip()
    if text.startswith("k8s://"):
        from ..deployment.live import parse_live

        parse_live(text)
        return text
    return Path(text)


def _kubernetes_version(text: str) -> str:
    text = str(text).strip().removeprefix("v")
    if not re.fullmatch(r"\d+\.\d+\.\d+", text):
        raise ValueError(f"expected a Kubernetes version MAJOR.MINOR.PATCH (1.30.0), got {text!r}")
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
    Option("triton_dynamic_dim", "inputs.dynamic_dim", "Size given to a variable (-1) input dimension when synthesizing requests.", whole_count, 16, "N"),
    Option("triton_slo_p99_ms", "slo.default.p99_ms", "Default latency budget: p99 in milliseconds, for models without their own SLO.", _positive_float, None, "MS"),
    Option("triton_slo_min_throughput", "slo.default.min_throughput", "Default minimum throughput in inferences per second.", _positive_float, None, "INFER_PER_S"),
    Option("triton_soak", "soak.duration", "PERF-3 soak duration: 90s, 30m, 24h (a nightly job); 0 turns the soak off (PERF-3 is then judged on accepted --triton-soak-evidence alone, else INCOMPLETE).", _duration, 60.0, "DURATION"),
    Option("triton_soak_evidence", "soak.evidence", "PERF-3: a nightly soak's readiness.json (its report directory, or its soak journal) that judges the leak rule when this run's soak is too short to (and PERF-3 as a whole with --triton-soak=0): accepted only when the server version, every model the server holds with its READY versions, config hash and file digests, and the launch arguments and image match this deployment, it soaked every model at no less than this run's planned rate, it finished in the past and is not older than soak_evidence_max_age_h, it ran at least soak_leak_min_duration_s and it passed.", Path, None, "PATH"),
    Option("triton_tune_batching", "performance.tune_batching", "CFG-2: reload batched models with a few max_queue_delay_microseconds values, measure each, recommend the best and restore the original config (needs explicit model control).", _flag, False, "BOOL", flag=True),
    Option("triton_allow", "attach.allow", "Classes of action allowed on an attached server (a server this run did not start): reload, faults, saturate, large_payloads; comma-separated. Default: none (the run changes nothing and stays under the load ceiling).", _allow_list, None, "A,B"),
    Option("triton_load_cluster", "fleet.load_cluster", "Run the load engine's workers on a Ray cluster: auto, ray://HOST:PORT or HOST:PORT (needs the [distributed] extra); default: worker processes on this machine.", _load_cluster, None, "ADDRESS"),
    Option("triton_budget", "run.budget", "Time for the whole run, shared across phases and models by the plan's estimates: 15m, 1h; what it cuts is INCOMPLETE naming it. Default: no budget.", _duration, None, "DURATION"),
    Option("readiness_report", "report.dir", "Directory for readiness.json, readiness.md and readiness.html.", Path, Path("triton-ready-report"), "DIR"),
    Option("triton_progress_after", "report.progress_after_s", "A check still running after this many seconds gets a progress line on the terminal (what it is doing: the curve point, the fault experiment's phase), again at each new step, and a heartbeat saying what the step waits for while it lasts; 0: from the start.", _non_negative_float, QUIET_S, "SECONDS"),
    Option("triton_baseline", "report.baseline", "PERF-5: a previous readiness.json (or a directory of runs: the newest READY one) to compare this run with; none: PERF-5 is INCOMPLETE.", Path, None, "PATH"),
    Option("triton_deployment", "deployment.manifests", "The deployment's rendered Kubernetes manifests (a file or a folder of *.yaml: `helm template` or `kustomize build` output), validated against --triton-kubernetes-version, or its Docker Compose file (`docker compose config` output), or k8s://NAMESPACE/NAME for the live objects of the current kubeconfig context's cluster, judged against what this run measured (docs/deployment.md); none: the deployment checks are NOT APPLICABLE.", _deployment, None, "PATH"),
    Option("triton_kubernetes_version", "deployment.kubernetes_version", "The Kubernetes version whose official schemas the manifests of --triton-deployment are validated against (an API it does not serve is refused).", _kubernetes_version, DEFAULT_KUBERNETES_VERSION, "VERSION"),
)
OPTION_BY_KEY = {option.key: option for option in OPTIONS}
OPTION_BY_YAML = {option.yaml_path: option for option in OPTIONS}
