"""When a launched server has settled: live, and every model in the repository index has either
loaded or failed. Shared by the launchers that start a server.

Triton lists a model whose config.pbtxt fails to parse or validate (a syntax error, an unknown
field, a preferred batch size above max_batch_size, ...) in POST /v2/repository/index with its name
only: no version, no state, no reason (`{"name": "unknown_field"}`). The server never tries to load
it, so once the server is live such a model has failed: it is not "still loading". Models that got
as far as loading and failed show `UNAVAILABLE` with a reason.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from ..server.client import http_status
from ..server.log import model_load_failures

LOADING_STATES = ("LOADING", "UNLOADING")


def repository_index(http_url: str, timeout_s: float = 2.0) -> list[dict[str, Any]] | None:
    """POST /v2/repository/index, or None when it did not answer with JSON."""
    request = urllib.request.Request(f"{http_url}/v2/repository/index", data=b"{}", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def loading_finished(index: list[dict[str, Any]] | None) -> bool:
    """No model of the index is loading or unloading. A model without a state (its config failed
    to parse or validate) counts as finished: it failed, and nothing will load it."""
    return index is not None and all(entry.get("state") not in LOADING_STATES for entry in index)


def failed_models(index: list[dict[str, Any]] | None, log: str = "") -> dict[str, str]:
    """Models the server could not load -> why: UNAVAILABLE with the server's reason, or no state
    at all (the config failed to parse or validate) with the server log's error, file:line:col for a
    parse error."""
    failed: dict[str, str] = {}
    reasons = model_load_failures(log)
    for entry in index or []:
        name, state = entry.get("name", "?"), entry.get("state")
        if state == "READY" or any(e.get("name") == name and e.get("state") == "READY" for e in index):
            continue
        if state is None:
            failed[name] = reasons.get(name) or ("its config failed to parse or validate (the repository index "
                                                 "lists it without a state); see the server log")
        elif state == "UNAVAILABLE":
            failed.setdefault(name, entry.get("reason") or "UNAVAILABLE, the server gave no reason")
    return failed


def settled(http_url: str) -> list[dict[str, Any]] | None:
    """The repository index once the server has settled (ready; or live with no model loading),
    else None."""
    if http_status(f"{http_url}/v2/health/ready") == 200:
        return repository_index(http_url) or []
    if http_status(f"{http_url}/v2/health/live") != 200:
        return None
    index = repository_index(http_url)
    return index if loading_finished(index) else None
