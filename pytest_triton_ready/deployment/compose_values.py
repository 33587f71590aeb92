"""One compose service read field by field: each value of the type the compose specification gives
it (a size, a duration, a number, a list), else one DeploymentError naming the file and the field
(`services.NAME.deploy.resources.limits.memory`)."""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path
from typing import Any

from .reading import DeploymentError

_SIZE = re.compile(r"(\d+(?:\.\d+)?) ?([kmgtp]?)i?b?", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def compose_bytes(value: Any) -> int:
    """A compose size in bytes: a number of bytes, or one with a unit (512m, 4g, 1.5gb, 2GiB), whose
    units Docker reads as powers of 1024 (go-units RAMInBytes)."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, (int, float)):
        return int(value)
    match = _SIZE.fullmatch(str(value).strip())
    if not match:
        raise ValueError(value)
    return int(float(match.group(1)) * 1024 ** _POWERS[match.group(2).lower()])


def compose_seconds(value: Any) -> float:
    """A compose duration in seconds (1m30s, 90s, 500ms), as Go's time.ParseDuration reads it: a
    number without a unit is refused, as compose refuses it (0 aside)."""
    text = str(value).strip() if isinstance(value, str) else None
    if text == "0":
        return 0.0
    if not text or _DURATION_PART.sub("", text):
        raise ValueError(value)
    return sum(float(number) * _SECONDS[unit] for number, unit in _DURATION_PART.findall(text))


def _number(value: Any) -> float:
    """A compose number (cpus: 1.5 or "1.5"); not a boolean, not infinite, not negative."""
    number = float("nan") if isinstance(value, bool) else float(str(value))
    if not math.isfinite(number) or number < 0:
        raise ValueError(value)
    return number


def split_words(text: str) -> list[str]:
    """A command string as compose splits it (shell words); unbalanced quotes split on spaces."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


class Service:
    """One service of a compose file; every getter takes the field below the service, dotted
    (`deploy.resources.limits.memory`, `volumes[2].read_only`), and gives None where it is absent."""

    def __init__(self, path: Path, name: str, body: Any) -> None:
        self.path, self.name, self.base = path, name, f"services.{name}"
        if not isinstance(body, dict):
            raise self.error("", body, "is not a mapping (a service's fields)")
        self.body = body

    def error(self, dotted: str, value: Any, problem: str) -> DeploymentError:
        field = f"{self.base}.{dotted}" if dotted else self.base
        unresolved = ("; it holds an unresolved variable: give --triton-deployment the output of "
                      "`docker compose config`, which resolves them") if "$" in str(value) else ""
        return DeploymentError(f"{self.path} (compose): field {field}: {json.dumps(value, default=str)} {problem}"
                               f"{unresolved}")

    def get(self, dotted: str) -> Any:
        node: Any = self.body
        for key, index in _SEGMENT.findall(dotted):
            if index:
                node = node[int(index)] if isinstance(node, list) and int(index) < len(node) else None
            else:
                node = node.get(key) if isinstance(node, dict) else None
        return node

    def typed(self, dotted: str, types: tuple[type, ...], what: str) -> Any:
        value = self.get(dotted)
        if value is not None and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            raise self.error(dotted, value, f"is not {what}")
        return value

    def mapping(self, dotted: str) -> dict[str, Any]:
        return self.typed(dotted, (dict,), "a mapping") or {}

    def items(self, dotted: str) -> list[Any]:
        return self.typed(dotted, (list,), "a list") or []

    def text(self, dotted: str) -> str | None:
        return self.typed(dotted, (str,), "a string")

    def size(self, dotted: str) -> int | None:
        return self._parsed(dotted, compose_bytes, "is not a size (a number of bytes, or one with a unit: 512m, 4g, "
                                                   "1.5gb)")

    def seconds(self, dotted: str) -> float | None:
        return self._parsed(dotted, compose_seconds, "is not a duration (a number with a unit: 90s, 1m30s, 500ms)")

    def number(self, dotted: str) -> float | None:
        return self._parsed(dotted, _number, "is not a number")

    def count(self, dotted: str) -> int | None:
        return self.typed(dotted, (int,), "a whole number")

    def words(self, dotted: str) -> list[str] | None:
        """A command (command, entrypoint, healthcheck.test): a string split into shell words, or a list."""
        value = self.typed(dotted, (str, list), "a command (a string, or a list of words)")
        if isinstance(value, list) and any(isinstance(w, (dict, list)) for w in value):
            raise self.error(dotted, value, "is not a command (a string, or a list of words)")
        return split_words(value) if isinstance(value, str) else None if value is None else [str(w) for w in value]

    def _parsed(self, dotted: str, parse: Any, problem: str) -> Any:
        value = self.get(dotted)
        if value is None:
            return None
        try:
            return parse(value)
        except (ValueError, TypeError):
            raise self.error(dotted, value, problem) from None

    def either(self, primary: str, legacy: str, read: Any) -> tuple[Any, str]:
        """(the value, its field) of a setting compose takes in two places (deploy.resources.limits.memory
        or mem_limit), which docker compose refuses to see set to two values; the primary field where
        neither is set."""
        first, second = read(primary), read(legacy)
        if first is not None and second is not None and first != second:
            raise self.error(legacy, self.get(legacy), f"differs from {self.base}.{primary} "
                                                       f"({json.dumps(self.get(primary))}): docker compose refuses "
                                                       "two values")
        return (second, legacy) if first is None and second is not None else (first, primary)
