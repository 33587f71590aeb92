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
