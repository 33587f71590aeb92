"""The tritonserver arguments of the manifest's container, which are what production runs: the
model control mode (poll reloads whatever lands in the repository, unrehearsed: Triton's docs call
it not recommended for production) and the restricted APIs on each protocol the pod serves."""

from __future__ import annotations

from collections.abc import Iterable

from .judgement import Judgement, judgement
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


def model_control_mode(container: TritonContainer) -> Judgement:
    """--model-control-mode is none or explicit, never poll."""
    modes = _values(container.args, "--model-control-mode")
    mode = modes[-1] if modes else "none"
    return judgement("model-control-mode", mode != "poll", container, _argument_field(container, "--model-control-mode"),
                     f"--model-control-mode={mode}" + ("" if modes else " (Triton's default)"), manifest_value=mode,
                     fix="--model-control-mode=explicit (models change only through the repository API, which SEC-1 "
                         "restricts, and each reload is a rehearsed step) or none: poll loads whatever appears in "
                         "the repository, half-copied files included")


def restricted_apis(container: TritonContainer, required: Iterable[str]) -> Judgement:
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
