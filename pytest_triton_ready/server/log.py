"""What a tritonserver log says that its APIs do not: why a model never reached loading, and what
happened at its last SIGTERM (`read_shutdown_log`).

A model whose config.pbtxt fails to parse or validate is listed by the repository index with its
name only (no version, state or reason); the server's log alone holds the cause, e.g.

    [libprotobuf ERROR ...] Error parsing text-format inference.ModelConfig: 16:12: Message type ...
    E1130 ... model_repository_manager.cc:1460] "Poll failed for model directory 'm': failed to read text proto from /r/m/config.pbtxt"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_POLL_FAILED = re.compile(r"Poll failed for model directory '(?P<model>[^']+)': (?P<reason>.*?)\"?\s*$")
_PARSE_ERROR = re.compile(r"Error parsing text-format inference\.ModelConfig: (?P<line>\d+):(?P<col>\d+): (?P<what>.*)$")
_PROTO_FILE = re.compile(r"failed to read text proto from (?P<path>\S+)")
# An ensemble Triton refused while validating its steps (a step model missing, a tensor map naming
# a tensor the step model does not have), e.g. "Invalid argument: in ensemble E, ensemble tensor t
# is mapping to non-existing input X in model M" or "...: ensemble E contains models that are not available".
_ENSEMBLE_INVALID = re.compile(r"\] \"(?P<reason>[^\"]*?\bensemble (?P<model>[^\s,]+)\b[^\"]*)\"")


def model_load_failures(log: str) -> dict[str, str]:
    """{model directory: why the server did not load it}, with file:line:col for a parse error."""
    failures: dict[str, str] = {}
    parse_error = None
    for line in log.splitlines():
        parsed = _PARSE_ERROR.search(line)
        if parsed:
            parse_error = parsed
            continue
        ensemble = _ENSEMBLE_INVALID.search(line)
        if ensemble and "model_repository_manager" in line:
            failures.setdefault(ensemble.group("model"), ensemble.group("reason").strip())
            continue
        failed = _POLL_FAILED.search(line)
        if not failed:
            continue
        reason = failed.group("reason").strip()
        proto = _PROTO_FILE.search(reason)
        if proto and parse_error is not None:
            reason = (f"{proto.group('path')}:{parse_error.group('line')}:{parse_error.group('col')}: "
                      f"{parse_error.group('what').strip() or 'syntax error'}")
        failures[failed.group("model")] = reason
        parse_error = None
    return failures


# What tritonserver says at every start on a machine without a usable GPU (no driver, no NVML, no
# DCGM): true, expected there, and the same at each restart, so it is said once, not per failure.
CPU_ONLY_SIGNS: dict[str, re.Pattern[str]] = {
    "DCGM unable to start": re.compile(r"DCGM unable to start"),
    "NVML not initialized": re.compile(r"Failed to initialize NVML"),
    "no CUDA driver": re.compile(r"CUDA driver version is insufficient|CudaDriverHelper has not been initialized"),
    "no pinned memory pool": re.compile(r"no pinned memory pool|Unable to allocate pinned system memory"),
}


def cpu_only_sign(line: str) -> str | None:
    """The short name of a CPU-only machine's start-up warning in `line`, else None."""
    return next((name for name, pattern in CPU_ONLY_SIGNS.items() if pattern.search(line)), None)


def cpu_only_summary(lines: list[str]) -> str | None:
    """One line for every CPU-only start-up warning among `lines`; None when there is none."""
    names = sorted({name for line in lines if (name := cpu_only_sign(line))}, key=list(CPU_ONLY_SIGNS).index)
    if not names:
        return None
    return (f"this machine has no usable GPU, so tritonserver warns at every start ({', '.join(names)}); "
            "those lines are left out of every excerpt")


_DRAIN = re.compile(r"Found (\d+) model versions that have in-flight inferences")
_MODEL_IN_FLIGHT = re.compile(r"Model '(?P<model>[^']+)' \(version (?P<version>[^)]+)\) has (?P<n>\d+) in-flight inferences")
_LIVE = re.compile(r"Found (\d+) live models")
_LOADED = re.compile(r"successfully loaded '(?P<model>[^']+)'")
_UNLOADED = re.compile(r"successfully unloaded '(?P<model>[^']+)'")


@dataclass
class ShutdownLog:
    """What a Triton server's log says about its last SIGTERM, for one model."""

    signalled: bool  # a "Signal (15) received." line was found
    counted: int | None  # in-flight inferences the server counted for the model at its first drain check
    aborted: str | None  # the abort line (gRPC assertion, SIGABRT), if the server aborted
    live_lines: int  # "Found N live models" lines with N > 0: seconds spent waiting for models to unload
    exit_timeout: bool  # the server gave up at its exit timeout
    still_loaded: tuple[str, ...] = ()  # models the log shows loaded and never unloaded after the signal


def read_shutdown_log(log: str, model: str) -> ShutdownLog:
    """Read the part of `log` after the last "Signal (15) received." line: how many in-flight
    inferences Triton counted for `model` when it began to drain (Triton 2.51 counts only requests
    it has not released; a python-backend model releases a request when execute() returns), whether
    it aborted, how long it waited for live models, and whether its exit timeout expired."""
    start = log.rfind("Signal (15) received")
    if start < 0:
        return ShutdownLog(False, None, None, 0, False)
    lines = log[start:].splitlines()
    counted = None
    for index, line in enumerate(lines):
        drain = _DRAIN.search(line)
        if drain is None:
            continue
        counted = 0
        for follow in lines[index + 1:index + 1 + int(drain.group(1))]:
            match = _MODEL_IN_FLIGHT.search(follow)
            if match and match.group("model") == model:
                counted += int(match.group("n"))
        break
    aborted = next((line.strip() for line in lines if "ASSERTION FAILED" in line or "Signal (6)" in line
                    or "Signal (11)" in line), None)
    live = sum(1 for line in lines if (m := _LIVE.search(line)) and int(m.group(1)) > 0)
    loaded = dict.fromkeys(m.group("model") for m in _LOADED.finditer(log[:start]))
    unloaded = {m.group("model") for m in _UNLOADED.finditer(log[start:])}
    still = tuple(name for name in loaded if name not in unloaded) if live else ()
    return ShutdownLog(True, counted, aborted, live, "Exit timeout expired" in log[start:], still)
