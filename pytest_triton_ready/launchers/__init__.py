"""Launchers: who owns the server under test. `attach` owns nothing; the others start and stop it.

Every launcher implements the `Launcher` protocol below and DECLARES what it can do in a
`LauncherCapabilities` (its `capabilities` attribute). Callers decide from the declaration, never
by probing for attributes: an action a launcher declares it cannot do raises `Unsupported`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import TritonReadyError

# The classes of action a run can take on a server (policy.ALLOW_CLASSES describes each). A launcher
# grants them in its capabilities (`may`); on a server whose launcher does not, `attach.allow` must.
ACTION_CLASSES = ("reload", "faults", "saturate", "large_payloads")


class LaunchError(TritonReadyError, RuntimeError):
    """The server could not be started or reached; the message is one readable line."""


class Unsupported(LaunchError):
    """The launcher declared (in its capabilities) that it cannot do this."""


@dataclass(frozen=True)
class Endpoints:
    """Where the server answers."""

    http_url: str
    grpc_url: str
    metrics_url: str


@dataclass(frozen=True)
class LauncherCapabilities:
    """What a launcher can do to the server it reaches, declared once per launcher.

    owns_process: the run started the server; it may stop, kill and SIGTERM it.
    can_signal_instance: a single process of the server (a python backend stub: one model
        instance) can be found (`stubs`) and signalled (`signal_process`).
    can_restart: the server can be killed and started again on the same endpoints (`restart`).
    can_read_process_memory: `pid` is a process on this host whose memory psutil can read.
    can_see_processes: the server's process tree is visible from here (`process_tree`), so what
        a kill left behind can be counted.
    can_start_scratch: a second server of the same kind can be started on another repository
        (`scratch`), e.g. for a version rollout on a scratch copy.
    can_read_container_memory: the server runs in a container whose memory the engine reports
        (`memory_usage()`: bytes, or None and why).
    may: the classes of action (ACTION_CLASSES) the run may take on the server without asking
        (`attach.allow`); by default every class when the run owns the process, none otherwise.
    """

    owns_process: bool
    can_signal_instance: bool
    can_restart: bool
    can_read_process_memory: bool
    can_see_processes: bool = False
    can_start_scratch: bool = False
    can_read_container_memory: bool = False
    may: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.may is None:
            object.__setattr__(self, "may", frozenset(ACTION_CLASSES) if self.owns_process else frozenset())
        unknown = set(self.may) - set(ACTION_CLASSES)
        if unknown:
            raise ValueError(f"unknown action class {', '.join(sorted(unknown))} (known: {', '.join(ACTION_CLASSES)})")


@runtime_checkable
class Launcher(Protocol):
    """What every launcher (attach, embedded, container) implements.

    Lifecycle: `start` (returns the endpoints once the server has settled), `stop` (graceful;
    returns the exit code when known), `kill` (a crash: SIGKILL), `restart` (kill, then start on
    the same endpoints), `terminate` (SIGTERM to the server process only, as an orchestrator
    does), `cleanup` (stop and remove everything the launcher made). Processes: `pid`,
    `exit_code`, `stubs`, `signal_process`, `process_tree`. Logs: `log_text`.
    `failed_models` names the models the server could not load at its last start (model -> reason).
    `model_repository` is the repository the server serves, as a directory on this host (None
    where it is not known here, e.g. attached). `memory_usage` is the container's memory (bytes,
    None) or (None, why) where the launcher cannot read one (capabilities.can_read_container_memory).
    `launch_identity` is how the server was started, which soak evidence compares: the launcher's
    name, the image (None where none) and tritonserver's arguments (`stable_arguments`); None where
    it is not known here (attached).
    """

    name: str
    capabilities: LauncherCapabilities
    exit_timeout_s: float
    failed_models: dict[str, str]

    @property
    def model_repository(self) -> Path | None: ...

    @property
    def launch_identity(self) -> dict[str, Any] | None: ...

    @property
    def endpoints(self) -> Endpoints: ...

    @property
    def pid(self) -> int | None: ...

    def start(self) -> Endpoints: ...

    def stop(self, grace_s: float | None = None) -> int | None: ...

    def kill(self) -> None: ...

    def restart(self) -> Endpoints: ...

    def terminate(self) -> None: ...

    def cleanup(self) -> None: ...

    def exit_code(self) -> int | None: ...

    def stubs(self, model: str | None = None) -> list: ...

    def signal_process(self, pid: int, sig: int) -> None: ...

    def process_tree(self) -> list[int] | None: ...

    def scratch(self, repository) -> Launcher: ...

    def log_text(self, max_lines: int = 200) -> str: ...

    def memory_usage(self) -> tuple[float | None, str | None]: ...


RESPONSE_CACHE_BYTES = 16 * 1024 * 1024
# Left out of a launch identity: the ports change from run to run, the repository's content is
# digested model by model (soak/model_files.py), and the backend and cache directories are where
# this installation keeps tritonserver, whose version is compared on its own.
PER_RUN_FLAGS = ("--http-port", "--grpc-port", "--metrics-port", "--model-repository", "--backend-directory",
                 "--cache-directory")


def stable_arguments(argv: list[str] | tuple[str, ...]) -> list[str]:
    """tritonserver's command line as two launches of the same deployment share it: the program by
    its name, without the PER_RUN_FLAGS (`--flag=value` or `--flag value`)."""
    kept: list[str] = []
    skip_value = False
    for index, arg in enumerate(argv):
        if skip_value:
            skip_value = False
        elif index == 0:
            kept.append(Path(arg).name)
        elif arg in PER_RUN_FLAGS:
            skip_value = True
        elif arg.split("=", 1)[0] not in PER_RUN_FLAGS:
            kept.append(arg)
    return kept


def serving_flags(exit_timeout_s: int = 30) -> list[str]:
    """The tritonserver flags every launcher uses: explicit model control with every model loaded,
    failed models reported instead of fatal, strict readiness, latency summaries, the response
    cache, production log verbosity."""
    return [
        "--model-control-mode=explicit",
        "--load-model=*",
        "--exit-on-error=false",
        "--strict-readiness=true",
        "--metrics-config=summary_latencies=true",
        "--metrics-interval-ms=1000",
        f"--cache-config=local,size={RESPONSE_CACHE_BYTES}",
        f"--exit-timeout-secs={exit_timeout_s}",
        "--log-verbose=0",
    ]
