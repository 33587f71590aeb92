"""The container's resource limits (`docker run --ulimit`), as a setting.

Triton's own advice for `docker run` is unlimited locked memory and a 64 MiB stack
(`memlock=-1,stack=67108864`): the default. An engine that cannot raise a limit (rootless podman,
or a host without CAP_SYS_RESOURCE) refuses to start the container; `--triton-ulimits` (YAML
`container.ulimits`) then lowers or drops them, e.g. `stack=67108864,nofile=4096` or `none`.

The text form is the settings' form: `NAME=VALUE[,NAME=VALUE...]` where VALUE is a number (soft
and hard), `SOFT:HARD`, `-1` or `unlimited`; or `none` for no limits beyond the engine's own.
The YAML form may also be a mapping (`{memlock: -1, stack: 67108864}`).
"""

from __future__ import annotations

import re
from typing import Any

DEFAULT_ULIMITS = "memlock=-1,stack=67108864"
NONE = "none"
# getrlimit(2)'s resource numbers (Linux), which is how runc names a limit it could not set.
RLIMIT_NAMES = ("cpu", "fsize", "data", "stack", "core", "rss", "nproc", "nofile", "memlock", "as", "locks",
                "sigpending", "msgqueue", "nice", "rtprio", "rttime")
_NUMBER = re.compile(r"^-?[0-9]+$")


def _bound(text: str, name: str) -> int:
    text = text.strip().lower()
    if text in ("unlimited", "-1"):
        return -1
    if not _NUMBER.match(text) or int(text) < 0:
        raise ValueError(f"limit {name}: expected a number, -1 or unlimited, got {text!r}")
    return int(text)


def _pair(value: Any, name: str) -> tuple[int, int]:
    if isinstance(value, bool):
        raise ValueError(f"limit {name}: expected a number, got {value!r}")
    soft_text, sep, hard_text = str(value).partition(":")
    soft = _bound(soft_text, name)
    hard = _bound(hard_text, name) if sep else soft
    if hard != -1 and (soft == -1 or soft > hard):
        raise ValueError(f"limit {name}: the soft limit {soft_text.strip()} is above the hard limit {hard_text.strip()}")
    return soft, hard


def parse_ulimits(value: Any) -> dict[str, tuple[int, int]]:
    """Text (`memlock=-1,stack=67108864`, `none`) or a mapping -> {name: (soft, hard)}; -1 is
    unlimited. ValueError names the bad part."""
    if value is None:
        return {}
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    else:
        text = str(value).strip()
        if text.lower() in (NONE, ""):
            return {}
        items = []
        for part in text.split(","):
            name, sep, limit = part.partition("=")
            if not sep:
                raise ValueError(f"expected NAME=VALUE[,NAME=VALUE...] or none, got {part.strip()!r}")
            items.append((name, limit))
    limits: dict[str, tuple[int, int]] = {}
    for name, limit in items:
        name = name.strip().lower()
        if name not in RLIMIT_NAMES:
            raise ValueError(f"unknown limit {name!r}; known: {', '.join(RLIMIT_NAMES)}")
        limits[name] = _pair(limit, name)
    return limits


def format_ulimits(limits: dict[str, tuple[int, int]]) -> str:
    """The normal text form: `memlock=-1,stack=67108864`, `nofile=1024:4096`, or `none`."""
    if not limits:
        return NONE
    return ",".join(f"{name}={soft}" if soft == hard else f"{name}={soft}:{hard}"
                    for name, (soft, hard) in limits.items())


def ulimits_setting(value: Any) -> str:
    """The settings' parser: any accepted form -> the normal text form (what reports show)."""
    return format_ulimits(parse_ulimits(value))


_REFUSED = re.compile(r"error setting rlimit type (?P<number>[0-9]+)")


def refused_limit(engine_message: str) -> str | None:
    """The limit an engine refused to set, from its error (runc: `error setting rlimit type 8`);
    None when the message is about something else."""
    match = _REFUSED.search(engine_message)
    if match:
        number = int(match.group("number"))
        return RLIMIT_NAMES[number] if number < len(RLIMIT_NAMES) else f"rlimit {number}"
    if "error setting rlimits" in engine_message or "setrlimit" in engine_message.lower():
        return "?"
    return None


def refusal_line(engine_message: str, ulimits: str, origin: str) -> str | None:
    """One line for an engine that refused a resource limit, naming the limit and the setting that
    changes it; None when the engine's error is not about a limit."""
    name = refused_limit(engine_message)
    if name is None:
        return None
    asked = parse_ulimits(ulimits)
    setting = f"--triton-ulimits={ulimits} (from {origin}; YAML container.ulimits)"
    if name in asked:
        soft, hard = asked[name]
        shown = format_ulimits({name: (soft, hard)})
        return (f"the container engine refused the resource limit {shown} ({setting}): it cannot raise it on this "
                f"host; lower or drop it, e.g. --triton-ulimits={_without(asked, name)}")
    # The engine's own default for this limit is what failed: podman, for one, stops applying its
    # containers.conf `default_ulimits` once a container asks for any limit, and its built-in
    # nofile/nproc defaults are above the hard limits of a host without CAP_SYS_RESOURCE.
    suggested = dict(asked)
    for extra in ("nofile", "nproc", *([name] if name in RLIMIT_NAMES else [])):
        suggested.setdefault(extra, (4096, 4096))
    what = "a resource limit" if name == "?" else f"the resource limit {name}"
    return (f"the container engine could not set {what}, which {setting} does not ask for: the engine's own "
            f"default is above this host's hard limit once other limits are asked for; give it within the host's "
            f"limit, e.g. --triton-ulimits={format_ulimits(suggested)}, or --triton-ulimits=none")


def _without(limits: dict[str, tuple[int, int]], name: str) -> str:
    return format_ulimits({k: v for k, v in limits.items() if k != name})
