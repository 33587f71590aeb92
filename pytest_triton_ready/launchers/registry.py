"""The one list of launchers: `server.launch` -> the class that implements it.

A launcher's module is imported only when its class is asked for (the container launcher pulls
in testcontainers when it starts a server); its `capabilities` are a class attribute, so the plan
can say what the run may do before anything starts. A new launcher is one entry here, one module
beside the others (the `Launcher` protocol), and its settings section if it has one.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from . import Launcher, LauncherCapabilities, LaunchError


@dataclass(frozen=True)
class LauncherKind:
    """One launcher: its `server.launch` name, where its class lives, one line for the help."""

    name: str
    module: str  # under pytest_triton_ready.launchers
    class_name: str
    summary: str

    def load(self) -> type:
        module = importlib.import_module(f"{__package__}.{self.module}")
        return getattr(module, self.class_name)

    @property
    def capabilities(self) -> LauncherCapabilities:
        """What the launcher declares it can do (an instance may refine what it can read)."""
        return self.load().capabilities

    def make(self, settings: Any) -> Launcher:
        return self.load().from_settings(settings)


LAUNCHER_KINDS: dict[str, LauncherKind] = {kind.name: kind for kind in (
    LauncherKind("attach", "attach", "AttachLauncher",
                 "a running server, the default with --triton-url"),
    LauncherKind("embedded", "embedded", "EmbeddedLauncher",
                 "start the tritonserver of the nvidia-pytriton wheel here"),
    LauncherKind("container", "container", "ContainerLauncher",
                 "start the tritonserver image in a container, set in the section container:"),
)}
LAUNCHER_NAMES = tuple(LAUNCHER_KINDS)


def launcher_kind(name: str) -> LauncherKind:
    """The registered launcher called `name`; LaunchError naming the known ones otherwise."""
    kind = LAUNCHER_KINDS.get(name)
    if kind is None:
        raise LaunchError(f"unknown launcher {name!r}; known: {', '.join(LAUNCHER_NAMES)}")
    return kind


def make_launcher(settings: Any) -> Launcher:
    """The launcher the settings ask for (`settings.launch`)."""
    return launcher_kind(settings.launch).make(settings)


def declared_capabilities(settings: Any) -> LauncherCapabilities:
    """What the launcher the settings ask for declares it can do, without making it."""
    return launcher_kind(settings.launch).capabilities
