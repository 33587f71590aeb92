"""Facts about the models a server serves, shared by the checks and the package: which models in
scope are READY, and how many instances a model config asks for."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..counterparts import Counterpart, streaming_counterpart

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder
    from .under_test import ServerUnderTest


def config_digest(config: dict[str, Any]) -> str:
    """SHA-256 (hex) of a model's effective config as the server serves it, keys sorted: two runs
    with the same digest served the same config (soak evidence, PERF-5's baseline)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


def same_digest(one: str, other: str) -> bool:
    """The same config digest, where one of them may be a shortened one (the first 16 hex digits
    that baselines of earlier releases recorded)."""
    shorter, longer = sorted((one, other), key=len)
    return len(shorter) >= 16 and longer.startswith(shorter)


def ready_names(client: Any) -> set[str]:
    """Names of the models with at least one READY version in the server's repository index."""
    return {e["name"] for e in client.repository_index() if e.get("state") == "READY"}


def ready_models(target: ServerUnderTest) -> list[str]:
    """Models in scope (`target.models()`, in its order) that are READY and answer unary requests;
    the others are CFG-1's business. Decoupled (streaming) models refuse unary ModelInfer and HTTP
    /infer: checks/test_streaming.py covers them (`ready_decoupled_models`)."""
    ready = ready_names(target.client)
    return [m for m in target.models() if m in ready and not is_decoupled(target.client.model_config(m))]


def ready_decoupled_models(target: ServerUnderTest) -> list[str]:
    """Models in scope that are READY and decoupled (`model_transaction_policy { decoupled: true }`)."""
    ready = ready_names(target.client)
    return [m for m in target.models() if m in ready and is_decoupled(target.client.model_config(m))]


def is_decoupled(config: dict[str, Any]) -> bool:
    return bool((config.get("model_transaction_policy") or {}).get("decoupled"))


def instance_count(config: dict[str, Any]) -> int:
    """Instances of a model from its effective config: each group's count, times its GPUs for a
    KIND_GPU group that lists them; at least 1 (no group: Triton makes one)."""
    total = 0
    for group in config.get("instance_group") or []:
        count = int(group.get("count", 1))
        gpus = group.get("gpus") or []
        total += count * (len(gpus) if group.get("kind") == "KIND_GPU" and gpus else 1)
    return max(1, total)


def streaming_only(unary: list[str], decoupled: list[str]) -> bool:
    """True when the models in scope that are READY are all decoupled (and there is at least one):
    a unary check then has nothing to send to, and the streaming checklist covers the deployment."""
    return not unary and bool(decoupled)


def covered_by_streaming(unary: list[str], decoupled: list[str], counterpart: Counterpart) -> str | None:
    """The not-applicable reason of a unary check on a deployment whose READY models in scope are
    all decoupled: it names the streaming check (checks/test_streaming.py) that covers the item
    (`counterpart`, from counterparts.py) and how it does. None when a unary model is there to run
    the check on, or no READY model at all (then the check's own INCOMPLETE stands)."""
    if not streaming_only(unary, decoupled):
        return None
    return (f"every READY model in scope is decoupled ({', '.join(decoupled)}): {counterpart.check} "
            f"(checks/test_streaming.py) {counterpart.how}")


def defer_to_streaming(check: CheckRecorder, target: ServerUnderTest, unary: list[str] | None = None) -> None:
    """End `check` NOT APPLICABLE when every READY model in scope is decoupled, naming the
    streaming check that covers its item (its entry in counterparts.STREAMING_COUNTERPARTS, found
    by the check's own name); return otherwise. `unary`: the check's own list of READY unary
    models, when it has one (default: `ready_models(target)`)."""
    unary = ready_models(target) if unary is None else unary
    if unary:
        return
    reason = covered_by_streaming(unary, ready_decoupled_models(target), streaming_counterpart(check.result.nodeid))
    if reason:
        check.not_applicable(reason)


@dataclass(frozen=True)
class InitialState:
    """The server as the run found it, read once before the first check: which models in the
    repository were not READY (with the server's reason) and what the health endpoints answered.
    Checks that judge their own effect on the server compare with this, never with an absolute
    /v2/health/ready that one model which failed to load keeps at 400 from the start."""

    not_ready: dict[str, str] = field(default_factory=dict)  # model -> "STATE: reason"
    live: bool = True
    ready_status: int | None = 200
    server_version: str = "unknown"
    ready_models: frozenset[str] = frozenset()  # models with a READY version at the start

    @property
    def ready(self) -> bool:
        return self.ready_status == 200

    def left_out(self, models: list[str]) -> list[str]:
        """Those of `models` that were not READY at the start (CFG-1's finding)."""
        return [m for m in models if m in self.not_ready]

    def health_after(self, live: bool, ready_status: int | None, ready_now: set[str] | None = None) -> str | None:
        """What got worse in the server's health since the start, or None: live lost, ready lost
        (only where it was 200 at the start), or a model READY at the start no longer READY
        (`ready_now`: the models READY now, where read)."""
        if self.live and not live:
            return f"the server is no longer live (live {'200' if live else 'not 200'}, ready {ready_status})"
        if self.ready and ready_status != 200:
            return f"/v2/health/ready answers {ready_status}, 200 when the run started"
        lost = sorted(self.ready_models - ready_now) if ready_now is not None else []
        if lost:
            return f"{', '.join(lost)} no longer READY (READY when the run started)"
        return None

    def restored(self, client: Any) -> bool:
        """The server is back as the run found it: ready, or, where /v2/health/ready was not 200 at
        the start (a model that failed to load), live with every model READY then READY again."""
        if client.ready():
            return True
        return not self.ready and client.live() and self.ready_models <= ready_names(client)


def read_initial_state(client: Any, failed_reasons: dict[str, str] | None = None) -> InitialState:
    """The repository index and health as they are now (call before the first check).
    `failed_reasons`: a launcher's reasons for models it saw fail (from its log), used where the
    index gives none (a config that never parsed is listed by name only)."""
    from .client import TritonUnreachable

    not_ready: dict[str, str] = {}
    try:
        index = client.repository_index()
    except TritonUnreachable:
        raise
    except Exception:  # a restricted repository API: which models failed cannot be read up front
        index = []
    for entry in index:
        name, state = entry["name"], entry.get("state")
        if state == "READY":
            continue
        reason = entry.get("reason") or (failed_reasons or {}).get(name) or (
            "never loaded: its config failed to parse or validate" if state is None else "the server gave no reason")
        not_ready.setdefault(name, f"{state or 'NOT LOADED'}: {reason.strip().splitlines()[0]}")  # no traceback
    ready = {e["name"] for e in index if e.get("state") == "READY"}
    not_ready = {m: why for m, why in not_ready.items() if m not in ready}  # another version serves
    try:
        version = str(client.server_metadata().get("version", "unknown"))
    except Exception:  # a restricted metadata endpoint: the version stays unknown
        version = "unknown"
    return InitialState(not_ready, client.live(), client.get_status("/v2/health/ready"), version, frozenset(ready))


def initial_state_of(target: ServerUnderTest) -> InitialState:
    """The target's InitialState; for a target that never read one, a server that was live and
    ready with nothing failed (the absolute endpoints then decide, as before)."""
    state = getattr(target, "initial_state", None)
    return state if isinstance(state, InitialState) else InitialState()


def note_left_out(check: CheckRecorder, target: ServerUnderTest) -> None:
    """An info finding naming the models in scope this check leaves out because they were not
    READY when the run started (CFG-1 fails on them); nothing when every model was READY."""
    state = initial_state_of(target)
    left = state.left_out(target.models())
    if left:
        check.finding("left out, not READY when the run started (CFG-1 names them): " + "; ".join(
            f"{m} ({state.not_ready[m]})" for m in left), severity="info")


def served_versions(client: Any) -> dict[str, list[str]]:
    """Each model's READY versions in the repository index, as the server lists them."""
    versions: dict[str, list[str]] = {}
    for entry in client.repository_index():
        if entry.get("state") == "READY":
            versions.setdefault(entry["name"], []).append(str(entry.get("version", "?")))
    return versions


def served_as(target: ServerUnderTest, models: list[str]) -> dict[str, str]:
    """For findings from a model's traffic, what was read: 'M version V on Triton X' per model
    (the versions READY now, the server version read at the start)."""
    versions = served_versions(target.client)
    server = initial_state_of(target).server_version
    return {m: f"{m} version {', '.join(versions.get(m, ['?']))} on Triton {server}" for m in models}
