"""Secrets in the settings and how every output is kept free of them.

A secret is a request header's value (auth), the credentials of a URL (`https://user:pw@host`)
and the credential part of a scheme-prefixed value (`Bearer <token>`). Header values come from
the command line, the YAML file with `${VAR}` expanded from the environment, an environment
variable named by `--triton-header-env`, or a file named by `--triton-header-file`, so that no
value has to sit in a process list or a committed file.

Every artifact and stream passes through one `Redactor`: the report files, the JUnit XML, the
terminal (failure text, tracebacks, locals), copies of the server log and the soak journal. A
value shorter than MIN_SECRET_CHARS would be replaced wherever those few characters occur (a `1`
in `"schema_version": "1.0"`), so such a value is refused at start-up instead.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from .errors import TritonReadyError

MIN_SECRET_CHARS = 6
REDACTED = "***"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SCHEMES = ("Bearer ", "Basic ", "Token ", "ApiKey ")
# pytest shortens a long value in an assertion's message to its head and tail around '...'
_SHORTENED = re.compile(r"([^\s'\"]+)\.\.\.([^\s'\"]+)")
SHORTENED_MIN_CHARS = 4  # a head and a tail at least this long, each, count as the secret


class SecretError(TritonReadyError, ValueError):
    """A secret that cannot be read or cannot be kept out of the output; one readable line."""


def expand(value: str, environ: Mapping[str, str], where: str) -> str:
    """`value` with each `${VAR}` replaced from the environment; an unset variable is an error."""
    def variable(match: re.Match) -> str:
        name = match.group(1)
        if name not in environ:
            raise SecretError(f"{where}: ${{{name}}} is not set in the environment")
        return environ[name]

    return _VARIABLE.sub(variable, value)


def header_from_environment(spec: str, environ: Mapping[str, str], where: str) -> tuple[str, str]:
    """`NAME=VARIABLE` -> (NAME, the variable's value)."""
    name, variable = _pair(spec, where, "NAME=VARIABLE")
    if variable not in environ:
        raise SecretError(f"{where}: environment variable {variable} (for header {name}) is not set")
    return name, environ[variable].strip()


def header_from_file(spec: str, where: str) -> tuple[str, str]:
    """`NAME=PATH` -> (NAME, the file's content without surrounding white space)."""
    name, path = _pair(spec, where, "NAME=PATH")
    try:
        return name, Path(path).expanduser().read_text().strip()
    except OSError as exc:
        raise SecretError(f"{where}: cannot read the value of header {name} from {path}: {exc.strerror}") from None


def _pair(spec: str, where: str, form: str) -> tuple[str, str]:
    name, sep, rest = spec.partition("=")
    if not sep or not name.strip() or not rest.strip():
        raise SecretError(f"{where}: expected {form}, got {spec.split('=')[0]!r}...")
    return name.strip(), rest.strip()


def split_credentials(url: str | None) -> tuple[str | None, str | None, list[str]]:
    """(the URL without user info, an Authorization header value for it or None, the secrets it carried)."""
    if not url or "@" not in url:
        return url, None, []
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.username is None and parts.password is None:
        return url, None, []
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    plain = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    raw_userinfo = parts.netloc.rsplit("@", 1)[0]
    return plain, f"Basic {token}", [s for s in (f"{user}:{password}", raw_userinfo, password, token) if s]


def secret_values(headers: Mapping[str, str], extra: list[str] = ()) -> list[str]:
    """Everything to keep out of the output: header values, their credential parts, `extra`."""
    values = [v for v in headers.values() if v] + [v for v in extra if v]
    for value in list(values):
        for scheme in _SCHEMES:
            if value.startswith(scheme) and len(value) - len(scheme) >= MIN_SECRET_CHARS:
                values.append(value[len(scheme):])
    return sorted(set(values), key=len, reverse=True)


def too_short(headers: Mapping[str, str]) -> list[str]:
    """Names of headers whose value is too short to be redacted without corrupting other text."""
    return sorted(name for name, value in headers.items() if value and len(value) < MIN_SECRET_CHARS)


class Redactor:
    """Replaces every secret, in the forms it takes in JSON, HTML/XML and URLs, by ***."""

    def __init__(self, secrets: list[str]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if not secret:
                continue
            forms.update({secret, html.escape(secret, quote=True), html.escape(secret, quote=False),
                          json.dumps(secret)[1:-1]})
        self.forms = sorted(forms, key=len, reverse=True)
        self.secrets = [s for s in secrets if len(s) > 2 * SHORTENED_MIN_CHARS]

    def __bool__(self) -> bool:
        return bool(self.forms)

    def text(self, text: str) -> str:
        for form in self.forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return self._shortened(text) if "..." in text and self.secrets else text

    def _shortened(self, text: str) -> str:
        """A secret shortened to head...tail (pytest's assertion message, `saferepr`) masked too."""
        def mask(match: re.Match) -> str:
            left, right = match.group(1), match.group(2)
            for secret in self.secrets:
                head = next((i for i in range(len(left) - SHORTENED_MIN_CHARS + 1) if secret.startswith(left[i:])),
                            None)
                tail = next((j for j in range(len(right), SHORTENED_MIN_CHARS - 1, -1) if secret.endswith(right[:j])),
                            None)
                if head is not None and tail is not None:
                    return left[:head] + REDACTED + right[tail:]
            return match.group(0)

        return _SHORTENED.sub(mask, text)

    def value(self, value: Any) -> Any:
        """A JSON-like structure with every string redacted."""
        if not self.forms:
            return value
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def file(self, path: Path) -> None:
        """Redact a text file in place (a JUnit XML, a copied log)."""
        if not self.forms or not path.is_file():
            return
        text = path.read_text(errors="replace")
        clean = self.text(text)
        if clean != text:
            path.write_text(clean)


class RedactingStream:
    """A text stream that redacts what is written to it (the terminal's file)."""

    def __init__(self, stream: Any, redactor: Redactor) -> None:
        self._stream = stream
        self._redactor = redactor

    def write(self, text: str) -> int:
        self._stream.write(self._redactor.text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
