"""The launchers' own YAML sections: `container:` for the container launcher.

The keys used to live in `server:` (`server.image`, `server.gpus`, `server.shm_size`,
`server.ulimits`); those spellings are still read, with a deprecation line (settings/file.py,
`MOVED_KEYS`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field

from ..yamlschema import Section
from .ulimits import DEFAULT_ULIMITS, ulimits_setting

DEFAULT_SHM_SIZE = "1g"


def _ulimits(value: Any) -> Any:
    if value is not None:
        ulimits_setting(value)
    return value


def _field(help: str, option: str, default: str | None = None) -> Any:
    extra = {"option": f"--triton-{option}", "env": f"TRITON_READY_{option.replace('-', '_').upper()}"}
    if default is not None:
        extra["shown_default"] = default
    return Field(None, description=help, json_schema_extra=extra)


class ContainerSection(Section):
    """`container:`: how the container launcher (`--triton-launch=container`) runs the server."""

    image: str | None = _field("Container image for --triton-launch=container.", "image")
    gpus: str | None = _field("GPUs for the container launcher: all (the default), none, or indices or UUIDs "
                              "like 0,1.", "gpus")
    shm_size: str | None = _field("Shared memory of the container launcher's container (docker --shm-size), "
                                  "e.g. 1g.", "shm-size", DEFAULT_SHM_SIZE)
    ulimits: Annotated[dict[str, int | str] | str | None, AfterValidator(_ulimits)] = _field(
        "Resource limits of the container launcher's container (docker --ulimit): NAME=VALUE[,...] with VALUE a "
        "number, SOFT:HARD or -1 (unlimited), or none; the default is Triton's advice. In YAML also a mapping.",
        "ulimits", DEFAULT_ULIMITS)


def container_help(key: str) -> str:
    """The help text of `container.<key>`, which the matching command-line option shares."""
    return ContainerSection.model_fields[key].description or ""
