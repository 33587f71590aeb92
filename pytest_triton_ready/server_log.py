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
