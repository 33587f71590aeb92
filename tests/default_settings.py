"""Settings with every named threshold at its default, for unit tests that build a check or an
engine without a settings file."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_triton_ready.thresholds import THRESHOLDS, ThresholdValue


def default_threshold(name: str) -> ThresholdValue:
    return ThresholdValue(name, THRESHOLDS[name].default, THRESHOLDS[name].unit, "default")


def default_settings() -> SimpleNamespace:
    """An object whose `threshold(name)` gives the named threshold's default."""
    return SimpleNamespace(threshold=default_threshold)
