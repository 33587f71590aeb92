"""Facts about the models a server serves, shared by the checks and the package: which models in
scope are READY, and how many instances a model config asks for."""

from __future__ import annotations

from typing import Any


def ready_names(client: Any) -> set[str]:
    """Names of the models with at least one READY version in the server's repository index."""
    return {e["name"] for e in client.repository_index() if e.get("state") == "READY"}


def ready_models(target: Any) -> list[str]:
    """Models in scope (`target.models()`, in its order) that are READY and answer unary requests;
    the others are CFG-1's business. Decoupled (streaming) models refuse unary ModelInfer and HTTP
    /infer: checks/test_streaming.py covers them (`ready_decoupled_models`)."""
    ready = ready_names(target.client)
    return [m for m in target.models() if m in ready and not is_decoupled(target.client.model_config(m))]


def ready_decoupled_models(target: Any) -> list[str]:
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


def covered_by_streaming(unary: list[str], decoupled: list[str], counterpart: str, how: str) -> str | None:
    """The not-applicable reason of a unary check on a deployment whose READY models in scope are
    all decoupled: it names `counterpart`, the streaming check (checks/test_streaming.py) that
    covers the item, and `how` it does. None when a unary model is there to run the check on, or
    no READY model at all (then the check's own INCOMPLETE stands)."""
    if not streaming_only(unary, decoupled):
        return None
    return (f"every READY model in scope is decoupled ({', '.join(decoupled)}): {counterpart} "
            f"(checks/test_streaming.py) {how}")


def defer_to_streaming(check: Any, target: Any, counterpart: str, how: str,
                       unary: list[str] | None = None) -> None:
    """End `check` NOT APPLICABLE when every READY model in scope is decoupled, naming the
    streaming check that covers its item (`covered_by_streaming`); return otherwise. `unary`: the
    check's own list of READY unary models, when it has one (default: `ready_models(target)`)."""
    unary = ready_models(target) if unary is None else unary
    if unary:
        return
    reason = covered_by_streaming(unary, ready_decoupled_models(target), counterpart, how)
    if reason:
        check.not_applicable(reason)
