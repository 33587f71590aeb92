"""Lets `pytest checks/` run from a clone whether or not the package is installed."""

from importlib.metadata import entry_points

if not any(ep.name == "triton_ready" for ep in entry_points(group="pytest11")):
    pytest_plugins = ["pytest_triton_ready.plugin"]
