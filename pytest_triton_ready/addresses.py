"""Checks of the addresses a setting can hold (host:port, a Ray cluster's address). Kept apart from
settings/options.py so the sections that declare such a setting (fleet.load_cluster) can use them."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit, urlunsplit

HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)$")


def host_port(netloc: str, what: str, original: str) -> None:
    """ValueError naming `original` unless `netloc` is host[:port] with a valid host and port."""
    host, port = netloc, None
    if netloc.startswith("["):
        close = netloc.find("]")
        host, rest = netloc[:close + 1], netloc[close + 1:]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"expected {what}, got {original!r}")
            port = rest[1:]
    elif ":" in netloc:
        host, _, port = netloc.rpartition(":")
    if not host or not HOST.match(host):
        raise ValueError(f"expected {what}, got {original!r} (no valid host)")
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"expected {what}, got {original!r} (port must be 1-65535)")


def load_cluster(text: str) -> str:
    """`auto` (the Ray cluster this host belongs to), `ray://host:port` (Ray Client) or `host:port`
    (the cluster's GCS address)."""
    text = str(text).strip()
    if text == "auto":
        return text
    what = "auto, ray://HOST:PORT or HOST:PORT"
    rest = text.removeprefix("ray://")
    if "://" in rest or "/" in rest or not re.search(r":\d+$", rest):
        raise ValueError(f"expected {what}, got {text!r}")
    host_port(rest, what, text)
    return text


def derived_url(http_url: str, port: int, path: str = "") -> str:
    """The same host as `http_url` on another port: how gRPC and metrics URLs are defaulted."""
    parts = urlsplit(http_url if "://" in http_url else f"http://{http_url}")
    host = parts.hostname or "localhost"
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, f"{host}:{port}", path, "", ""))


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (a server there cannot be reached from elsewhere)."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_of(target: str) -> str:
    """The host of a URL (`http://h:8000`) or of a bare `host:port` (`h:8001`, `[::1]:8001`)."""
    return urlsplit(target if "://" in target else f"//{target}").hostname or ""
