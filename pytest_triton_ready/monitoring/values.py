"""One live value of one monitoring layer, as the layers and the LLM layer read them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerValue:
    """One live value of one layer; `value` is None when it cannot be read, and `note` says why."""

    layer: str
    name: str
    value: float | None
    unit: str
    model: str | None = None
    note: str = ""
