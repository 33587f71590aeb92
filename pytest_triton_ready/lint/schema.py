"""The YAML section `lint:` (docs/config-rules.md), declared once."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from ..yamlschema import Section, setting

ROLLOUTS = ("canary", "blue-green")


def _rollout(kind: str) -> str:
    if kind not in ROLLOUTS:
        raise ValueError(f"expected one of {', '.join(ROLLOUTS)}")
    return kind


class LintSection(Section):
    """`lint:` (CFG-1, CFG-3): what the model-config lint knows beyond the configs."""

    disable: list[str] = setting(list, "rule ids to turn off")
    nondeterministic_models: list[str] = setting(list, "models whose answers may differ for the same input (no response cache)")
    stateful_models: list[str] = setting(list, "models that keep state between requests (no dynamic batching)")
    preferred_batch_size_models: list[str] = setting(list, "models whose engine has batch-size-specific profiles")
    rollout: dict[str, Annotated[str, AfterValidator(_rollout)]] = setting(
        dict, "rollout per model: canary or blue-green (CFG-3 then needs two versions)")
    measure_model_memory: bool | None = setting(
        None, "reload each model to measure its memory (default: when the run owns the server)")

    @property
    def measures_model_memory(self) -> bool:
        """Whether CFG-1 measures model memory: unless turned off; a server the run does not own
        also needs `reload` allowed (policy.Policy decides that)."""
        return self.measure_model_memory is not False
