"""What a tritonserver log says that its APIs do not: why a model never reached loading.

A model whose config.pbtxt fails to parse or validate is listed by the repository index with its
name only (no version, state or reason); the server's log alone holds the cause, e.g.

    [libprotobuf ERROR ...] Error parsing text-format inference.ModelConfig: 16:12: Message type ...
    E1130 ... model_repository_manager.cc:1460] "Poll failed for model directory 'm': failed to read text proto from /r/m/config.pbtxt"
"""

from __future__ import annotations

import re

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
