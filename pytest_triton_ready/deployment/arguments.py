"""The tritonserver arguments of the manifest's container, which are what production runs: the
model control mode (poll reloads whatever lands in the repository, unrehearsed: Triton's docs call
it not recommended for production), the restricted APIs on each protocol the pod serves, and the
flags that decide what the checks measured, held against the server this run measured."""

from __future__ import annotations

from collections.abc import Iterable

from .judgement import ContainerJudgement, judgement
from .reading import TritonContainer

PROTOCOLS = (("HTTP", "--http-restricted-api", "--allow-http"), ("gRPC", "--grpc-restricted-protocol", "--allow-grpc"))


def _values(args: list[str], flag: str) -> list[str]:
    """Every value of a flag that may be given more than once (`--flag=V` or `--flag V`)."""
    found = []
    for number, word in enumerate(args):
        if word.startswith(flag + "="):
            found.append(word.split("=", 1)[1])
        elif word == flag and number + 1 < len(args):
            found.append(args[number + 1])
    return found


def _argument_field(container: TritonContainer, flag: str) -> str:
    words = [str(w) for w in container.container.get("args") or []]
    where = next((n for n, w in enumerate(words) if w == flag or w.startswith(flag + "=")), None)
    return f"args[{where}]" if where is not None else "args"


def model_control_mode(container: TritonContainer) -> ContainerJudgement:
    """--model-control-mode is none or explicit, never poll."""
    modes = _values(container.args, "--model-control-mode")
    mode = modes[-1] if modes else "none"
    return judgement("model-control-mode", mode != "poll", container, _argument_field(container, "--model-control-mode"),
                     f"--model-control-mode={mode}" + ("" if modes else " (Triton's default)"), manifest_value=mode,
                     fix="--model-control-mode=explicit (models change only through the repository API, which SEC-1 "
                         "restricts, and each reload is a rehearsed step) or none: poll loads whatever appears in "
                         "the repository, half-copied files included")


def restricted_apis(container: TritonContainer, required: Iterable[str]) -> ContainerJudgement:
    """Every required API category is restricted (needs a header) on each protocol the server serves."""
    required = list(required)
    gaps, served = [], []
    for protocol, flag, allow in PROTOCOLS:
        if (_values(container.args, allow) or ["true"])[-1].lower() == "false":
            continue
        served.append(protocol)
        restricted = {api.strip() for value in _values(container.args, flag) for api in value.split(":", 1)[0].split(",")}
        missing = [api for api in required if api not in restricted]
        if missing:
            gaps.append(f"{protocol} ({flag}) leaves {', '.join(missing)} open")
    message = (f"required restricted: {', '.join(required)}; "
               + ("; ".join(gaps) if gaps else f"restricted on {' and '.join(served) or 'no protocol served'}"))
    return judgement("restricted-apis", not gaps, container, "args", message, manifest_value=container.args,
                     fix=f"--http-restricted-api={','.join(required)}:<header>=<value> and --grpc-restricted-protocol="
                         f"{','.join(required)}:<header>=<value> (the value from a Secret): anyone who reaches the "
                         "pod can otherwise load, unload or reconfigure models")


# The flags whose value decides what a check measured, Triton's default where a command line has
# none, and what differs where the pod's differs from the measured server's.
MEASURED_FLAGS = (("--model-control-mode", "none", "PERF-4's reload and rollout checks and OPS-1"),
                  ("--exit-timeout-secs", "30", "PERF-4's SIGTERM drain"),
                  ("--log-format", "default", "MON-4's log checks"),
                  ("--strict-readiness", "true", "the ready endpoints PERF-4 judged"),
                  ("--http-restricted-api", "none", "SEC-1's restricted APIs over HTTP"),
                  ("--grpc-restricted-protocol", "none", "SEC-1's restricted APIs over gRPC"))
_RESTRICTED = ("--http-restricted-api", "--grpc-restricted-protocol")


def _setting(args: list[str], flag: str, default: str) -> str:
    """The flag's effective value; for a restricted API flag only its API categories (the header
    and its value, a secret, are never shown)."""
    values = _values(args, flag)
    if flag in _RESTRICTED:
        categories = sorted({api.strip() for value in values for api in value.split(":", 1)[0].split(",")})
        return ",".join(categories) or default
    return values[-1] if values else default


def measured_arguments(container: TritonContainer, server_arguments: list[str] | None, why_missing: str) -> ContainerJudgement:
    """The pod runs the flags the server this run measured ran: the same model control mode, exit
    timeout, log format, strict readiness and restricted API categories (Triton's defaults where a
    command line leaves one out), else the checks that depend on a differing flag judged another server."""
    if server_arguments is None:
        return judgement("measured-arguments", None, container, "args",
                         f"the container's flags, held against nothing: {why_missing}")
    differences, pod_values = [], {}
    for flag, default, depends in MEASURED_FLAGS:
        pod, run = _setting(container.args, flag, default), _setting(server_arguments, flag, default)
        pod_values[flag] = pod
        if pod != run:
            differences.append(f"{flag}: the pod {pod}, the server measured {run} ({depends})")
    message = ("; ".join(differences) + ": those checks judged another server than the pod will run"
               if differences else "the pod runs the flags the measured server ran: "
               + ", ".join(f"{flag}={value}" for flag, value in pod_values.items()))
    return judgement("measured-arguments", not differences, container, "args", message, manifest_value=pod_values,
                     fix="measure the server the pod runs: --triton-launch=container with --triton-deployment carries "
                         "the container's flags over, or give them in server.args; else change the manifest to the "
                         "flags measured here")
